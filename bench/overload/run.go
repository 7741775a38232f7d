package overload

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/sim"
)

// Options configures [Run]. The zero value is the default.
type Options struct {
	Model      sim.IOModel // the zero value: sim's default shrunk to 20 in flight (1000/s), to keep real time cheap
	Warmup     time.Duration
	Phase      time.Duration // 0 means 5 s
	Bin        time.Duration // 0 means 250 ms
	Seed       uint64
	Contenders []sim.OverloadContender // nil means Contenders(Model.Capacity)
	// Progress, when set, is called once a second with the time elapsed
	// and the run's length.
	Progress func(elapsed, total time.Duration)
}

// Run runs every contender at once, in real time, each against its own
// copy of the model with the same arrival draws (sim.RealTime), and
// summarizes them as sluice sim overload does.
func Run(ctx context.Context, o Options) (*sim.OverloadResult, error) {
	if o.Model.Capacity == 0 {
		o.Model.Capacity = 20
	}
	if o.Model.Base == 0 {
		o.Model.Base = 20 * time.Millisecond
	}
	if o.Warmup == 0 {
		o.Warmup = 3 * time.Second
	}
	if o.Phase <= 0 {
		o.Phase = 5 * time.Second
	}
	if o.Bin <= 0 {
		o.Bin = 250 * time.Millisecond
	}
	if o.Contenders == nil {
		o.Contenders = Contenders(o.Model.Capacity)
	}
	return sim.RealTime(ctx, sim.RealTimeOptions{Seed: o.Seed, Model: o.Model, Warmup: o.Warmup, Phase: o.Phase,
		Bin: o.Bin, Contenders: o.Contenders, Progress: o.Progress})
}

// Targets are issue 17's goals for a limiter in the overload model.
var Targets = []string{
	"goodput >= 100% of the oracle at 2x",
	"goodput >= 95% of the oracle at 5x",
	"p99 <= 2.5x no-load in steady overload (2x, 5x)",
	"p99 back <= 3x no-load within 2 s of halving",
	"0 false rejections at 0.5x",
}

// Verdicts returns, for each contender, whether each of Targets is met
// and by how much it is missed.
func Verdicts(res *sim.OverloadResult) map[string][]string {
	rows := map[string]map[string]sim.OverloadRow{}
	for _, r := range res.Rows {
		if rows[r.Limiter] == nil {
			rows[r.Limiter] = map[string]sim.OverloadRow{}
		}
		rows[r.Limiter][r.Phase] = r
	}
	out := map[string][]string{}
	for name, ph := range rows {
		v := []string{
			atLeast(ph["2x"].GoodputRatio, 1, "%.1f%%", 100),
			atLeast(ph["5x"].GoodputRatio, 0.95, "%.1f%%", 100),
			atMost(max(ph["2x"].P99Ratio, ph["5x"].P99Ratio), 2.5, "%.2fx", 1),
			atMost(ph["halved"].SettleS, 2, "%.2f s", 1),
			atMost(ph["0.5x"].FalseRejectRate, 0, "%.4f%%", 100),
		}
		out[name] = v
	}
	return out
}

func atLeast(v, want float64, format string, scale float64) string {
	if math.IsNaN(v) {
		return "missed (none)"
	}
	if v >= want {
		return "met (" + fmt.Sprintf(format, v*scale) + ")"
	}
	return "missed by " + fmt.Sprintf(format, (want-v)*scale) + " (" + fmt.Sprintf(format, v*scale) + ")"
}

func atMost(v, want float64, format string, scale float64) string {
	if math.IsNaN(v) {
		return "missed (never)"
	}
	if v <= want {
		return "met (" + fmt.Sprintf(format, v*scale) + ")"
	}
	return "missed by " + fmt.Sprintf(format, (v-want)*scale) + " (" + fmt.Sprintf(format, v*scale) + ")"
}
