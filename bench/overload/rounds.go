package overload

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/sim"
)

// Row is one contender in one phase of a model: in one round, or the
// median of each column over rounds (see [Medians]).
type Row struct {
	Model, Limiter, Phase string
	Goodput               float64 // successful requests per second
	GoodputRatio          float64 // over the reference's (oracle-fixed) in the same round
	P50Ratio, P99Ratio    float64 // of successful requests, over the no-load p50 and p99 of the same round
	RefusalRate           float64 // refused attempts over attempts
	Rounds                int     // rounds the medians are of
}

// IORows returns the rows of one run of the I/O-bound model.
func IORows(res *sim.OverloadResult) []Row {
	rows := make([]Row, 0, len(res.Rows))
	for _, r := range res.Rows {
		rows = append(rows, Row{Model: "io", Limiter: r.Limiter, Phase: r.Phase, Goodput: r.Goodput,
			GoodputRatio: r.GoodputRatio, P50Ratio: r.P50Ratio, P99Ratio: r.P99Ratio, RefusalRate: r.RejectRate, Rounds: 1})
	}
	return rows
}

// median returns the median of the numbers of v that are not NaN (NaN if
// none is).
func median(v []float64) float64 {
	v = slices.DeleteFunc(slices.Clone(v), math.IsNaN)
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// Medians folds rounds of rows into one row per model, contender and
// phase, each column the median over the rounds (in the order of the
// first round).
func Medians(rounds [][]Row) []Row {
	type key struct{ model, limiter, phase string }
	var order []key
	cols := map[key][][5]float64{}
	for _, round := range rounds {
		for _, r := range round {
			k := key{r.Model, r.Limiter, r.Phase}
			if _, ok := cols[k]; !ok {
				order = append(order, k)
			}
			cols[k] = append(cols[k], [5]float64{r.Goodput, r.GoodputRatio, r.P50Ratio, r.P99Ratio, r.RefusalRate})
		}
	}
	out := make([]Row, 0, len(order))
	for _, k := range order {
		var m [5]float64
		for c := range m {
			v := make([]float64, 0, len(cols[k]))
			for _, r := range cols[k] {
				v = append(v, r[c])
			}
			m[c] = median(v)
		}
		out = append(out, Row{Model: k.model, Limiter: k.limiter, Phase: k.phase, Goodput: m[0], GoodputRatio: m[1],
			P50Ratio: m[2], P99Ratio: m[3], RefusalRate: m[4], Rounds: len(cols[k])})
	}
	return out
}

// isSluice reports whether name is one of sluice's limiters; isPeer,
// whether it is a peer's (not sluice's, not the reference, not "none").
func isSluice(name string) bool { return strings.HasPrefix(name, "sluice-") }
func isPeer(name string) bool {
	return !isSluice(name) && name != sim.OracleName && name != "none"
}

// Beat is a peer better than one of sluice's limiters on both goodput
// and p99 in one phase.
type Beat struct {
	Model, Phase, Sluice, Peer string
	Goodput, P99               float64 // the peer's goodput ratio over sluice's; sluice's p99 over the peer's
}

// Beaten returns, for every model and phase of rows, each peer that is
// better than a sluice limiter on both goodput (ratio to the reference)
// and p99 (ratio to no-load).
func Beaten(rows []Row) []Beat {
	var out []Beat
	for _, s := range rows {
		if !isSluice(s.Limiter) {
			continue
		}
		for _, p := range rows {
			if p.Model == s.Model && p.Phase == s.Phase && isPeer(p.Limiter) &&
				p.GoodputRatio > s.GoodputRatio && p.P99Ratio < s.P99Ratio {
				out = append(out, Beat{Model: s.Model, Phase: s.Phase, Sluice: s.Limiter, Peer: p.Limiter,
					Goodput: p.GoodputRatio / s.GoodputRatio, P99: s.P99Ratio / p.P99Ratio})
			}
		}
	}
	return out
}

// WriteRows writes rows as an aligned table, then, per model and phase,
// which sluice limiters no peer beats on both goodput and p99.
func WriteRows(w io.Writer, rows []Row) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%-5s %26s %11s %9s %8s %8s %8s %8s %6s\n", "model", "limiter", "phase", "goodput/s",
		"goodput", "p50", "p99", "refused", "rounds")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-5s %26s %11s %9.0f %8.3f %8.2f %8.2f %8.4f %6d\n", r.Model, r.Limiter, r.Phase, r.Goodput,
			r.GoodputRatio, r.P50Ratio, r.P99Ratio, r.RefusalRate, r.Rounds)
	}
	beats := Beaten(rows)
	type phase struct{ model, phase string }
	var phases []phase
	sluice := map[phase][]string{}
	for _, r := range rows {
		k := phase{r.Model, r.Phase}
		if !slices.Contains(phases, k) {
			phases = append(phases, k)
		}
		if isSluice(r.Limiter) && !slices.ContainsFunc(beats, func(x Beat) bool {
			return x.Model == k.model && x.Phase == k.phase && x.Sluice == r.Limiter
		}) {
			sluice[k] = append(sluice[k], r.Limiter)
		}
	}
	fmt.Fprintln(&b, "\nsluice limiters no peer beats on both goodput and p99 (medians over the rounds):")
	for _, k := range phases {
		fmt.Fprintf(&b, "  %-5s %-11s %s\n", k.model, k.phase, orNone(sluice[k]))
	}
	for _, x := range beats {
		fmt.Fprintf(&b, "  beaten: %s %s: %s by %s (goodput %.1f%% higher, p99 %.1f%% lower)\n", x.Model, x.Phase,
			x.Sluice, x.Peer, (x.Goodput-1)*100, (1-1/x.P99)*100)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	return strings.Join(v, ", ")
}
