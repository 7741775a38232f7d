package redis

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// ScaleSummary pools one target's rounds in one mode.
type ScaleSummary struct {
	Target             *ScaleTarget
	Mode               string
	Rounds             int
	Decisions, Allowed int64
	Errors             int64
	Elapsed            time.Duration
	ServerCPU          time.Duration // all nodes
	CommandTime        time.Duration // all nodes, running scripts and transactions
	BusiestCPU         time.Duration // per round, the node with the most CPU, summed
	ClientCPU          time.Duration
	P50, P99           time.Duration // medians of the rounds'
	Calls, Requests    uint64
	KeysMaxOverMean    float64 // DBSIZE after each round: the largest node over the mean, the median of the rounds
	// Paired ratios to the baseline target in the same round and mode
	// (medians and ranges): decisions/s, and decisions per second of
	// primary CPU.
	PairedRate, PairedPerCPU []float64
}

// PerSecond returns decisions per second.
func (s ScaleSummary) PerSecond() float64 { return float64(s.Decisions) / s.Elapsed.Seconds() }

// PerPrimaryCPU returns decisions per second of redis-server CPU: what one
// primary would decide a second with a core of its own, at this load.
func (s ScaleSummary) PerPrimaryCPU() float64 { return float64(s.Decisions) / s.ServerCPU.Seconds() }

// Summarize pools results by target and mode, in the targets' and modes'
// order of first appearance, with paired ratios to baseline (a target's
// Name; "" or absent: none).
func Summarize(results []ScaleResult, baseline string) []ScaleSummary {
	type key struct {
		t    *ScaleTarget
		mode string
	}
	var order []key
	by := map[key][]ScaleResult{}
	for _, r := range results {
		k := key{r.Target, r.Mode}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], r)
	}
	slices.SortStableFunc(order, func(a, b key) int { return a.t.Primaries - b.t.Primaries })
	base := func(mode string, round int) *ScaleResult {
		for i := range results {
			r := &results[i]
			if r.Target.Name == baseline && r.Mode == mode && r.Round == round {
				return r
			}
		}
		return nil
	}
	var out []ScaleSummary
	for _, k := range order {
		s := ScaleSummary{Target: k.t, Mode: k.mode}
		var p50, p99, imb []float64
		for _, r := range by[k] {
			s.Rounds++
			s.Decisions += r.Decisions
			s.Allowed += r.Allowed
			s.Errors += r.Errors
			s.Elapsed += r.Elapsed
			s.ServerCPU += r.ServerCPU
			s.CommandTime += r.CommandTime
			s.BusiestCPU += slices.Max(r.NodeCPU)
			s.ClientCPU += r.ClientCPU
			s.Calls += r.Calls
			s.Requests += r.Requests
			p50 = append(p50, float64(r.P50))
			p99 = append(p99, float64(r.P99))
			var total int64
			for _, n := range r.NodeKeys {
				total += n
			}
			if total > 0 {
				imb = append(imb, float64(slices.Max(r.NodeKeys))*float64(len(r.NodeKeys))/float64(total))
			}
			b := base(r.Mode, r.Round)
			if b != nil && b.Decisions > 0 && r.Decisions > 0 {
				s.PairedRate = append(s.PairedRate, r.PerSecond()/b.PerSecond())
			}
			if b != nil && b.Decisions > 0 && r.Decisions > 0 && b.ServerCPU > 0 && r.ServerCPU > 0 {
				s.PairedPerCPU = append(s.PairedPerCPU, (float64(r.Decisions)/r.ServerCPU.Seconds())/(float64(b.Decisions)/b.ServerCPU.Seconds()))
			}
		}
		s.P50, s.P99 = time.Duration(Median(p50)), time.Duration(Median(p99))
		s.KeysMaxOverMean = Median(imb)
		out = append(out, s)
	}
	return out
}

// WriteScaleTable writes the summaries as a Markdown table.
func WriteScaleTable(w io.Writer, sums []ScaleSummary, baseline string) {
	fmt.Fprintf(w, "| Redis | mode | decisions/s (sum) | p50 | p99 | redis-server CPU / decision (script wall time) | **decisions per primary-CPU-second** | primaries' CPU, all (busiest) | client CPU / decision | mean batch | keys per node, max/mean | vs %s: decisions/s | vs %s: per primary-CPU | allowed | errors |\n", baseline, baseline)
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range sums {
		el := s.Elapsed.Seconds()
		fmt.Fprintf(w, "| %s | %s | %.0f | %v | %v | %.2f µs (%.2f) | **%.0f** | %.2f (%.2f) cores | %.2f µs | %.1f | %.3f | %s | %s | %.1f%% | %d |\n",
			s.Target.Name, s.Mode, s.PerSecond(), s.P50.Round(time.Microsecond), s.P99.Round(time.Microsecond),
			perDecision(s.ServerCPU, s.Decisions), perDecision(s.CommandTime, s.Decisions), s.PerPrimaryCPU(), s.ServerCPU.Seconds()/el, s.BusiestCPU.Seconds()/el,
			perDecision(s.ClientCPU, s.Decisions), float64(s.Requests)/float64(max(1, s.Calls)), s.KeysMaxOverMean,
			ratioRange(s.PairedRate), ratioRange(s.PairedPerCPU), 100*float64(s.Allowed)/float64(max(1, s.Decisions)), s.Errors)
	}
}

// ratioRange formats the median and range of paired ratios.
func ratioRange(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", Median(xs), slices.Min(xs), slices.Max(xs))
}

// WriteSpreadTable writes, for each key set and each cluster size, how the
// Redis keys (as the store names them: redisKey) fall on slots and
// primaries.
func WriteSpreadTable(w io.Writer, sets map[string][]string, primaries []int) {
	names := make([]string, 0, len(sets))
	for n := range sets {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprintln(w, "| key set | example Redis key | keys | slots used | keys per slot: mean / max | primaries | keys per primary | max/mean | expected by chance |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---|---:|---:|")
	for _, name := range names {
		keys := sets[name]
		for _, p := range primaries {
			if p < 1 {
				continue
			}
			sp := SlotSpread(keys, EvenSlots(p))
			per := make([]string, len(sp.PerPrimary))
			for i, c := range sp.PerPrimary {
				per[i] = fmt.Sprint(c)
			}
			fmt.Fprintf(w, "| %s | `%s` | %d | %d | %.2f / %d | %d | %s | %.4f | %.4f |\n",
				name, keys[0], sp.Keys, sp.UsedSlots, sp.MeanSlot, sp.MaxSlot, p, strings.Join(per, " / "), sp.Imbalance, sp.Expected)
		}
	}
}
