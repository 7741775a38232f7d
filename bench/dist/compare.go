package dist

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"
)

// Round runs l against every set once, in an order rotated by round, each
// with counters of its own, and returns the results in the sets' order.
func Round(ctx context.Context, sets []*Set, l Load, round int, log io.Writer) ([]Result, error) {
	out := make([]Result, len(sets))
	for k := range sets {
		i := (k + round) % len(sets)
		l.Prefix = fmt.Sprintf("r%d-%d-", round, time.Now().UnixNano())
		r, err := Measure(ctx, sets[i], l)
		if err != nil {
			return nil, err
		}
		if r.Errors > 0 {
			return nil, fmt.Errorf("%s: %d errors, first: %v", r.Name, r.Errors, r.FirstErr)
		}
		fmt.Fprintf(log, "  %s\n", r)
		out[i] = r
	}
	return out, nil
}

// Median returns the median of rs metric by metric: the round with the
// median decisions a second, its CPU scaled to the median CPU a decision,
// and the median p50 and p99 (at a fixed offered rate every round makes
// the same decisions, and the other metrics are what differ).
func Median(rs []Result) Result {
	mid := func(f func(Result) float64) Result {
		s := slices.Clone(rs)
		slices.SortFunc(s, func(a, b Result) int { return cmp.Compare(f(a), f(b)) })
		return s[len(s)/2]
	}
	perDecision := func(r Result) float64 { return r.CPU.Seconds() / float64(max(1, r.Decisions)) }
	m := mid(Result.PerSecond)
	m.CPU = time.Duration(perDecision(mid(perDecision)) * float64(m.Decisions) * float64(time.Second))
	m.P50 = mid(func(r Result) float64 { return float64(r.P50) }).P50
	m.P99 = mid(func(r Result) float64 { return float64(r.P99) }).P99
	return m
}

// Table writes the median result of each set at one load as markdown
// rows, with the ratios of each set to the last one (sluice rls).
func Table(w io.Writer, label string, med []Result) {
	base := med[len(med)-1]
	for _, r := range med {
		fmt.Fprintf(w, "| %s | %s | %.0f | %.0f (%.2f×) | %.0f (%.2f×) | %v (%.2f×) |\n", label, r.Name,
			r.PerSecond(), r.PerCPU(), r.PerCPU()/base.PerCPU(),
			r.CPU.Seconds()*1e6/float64(max(1, r.Decisions)), (r.CPU.Seconds()/float64(max(1, r.Decisions)))/(base.CPU.Seconds()/float64(max(1, base.Decisions))),
			r.P99.Round(time.Microsecond), float64(r.P99)/float64(base.P99))
	}
}
