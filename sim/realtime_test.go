package sim

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRealTime runs the model briefly in real time: a row per contender
// and phase, the oracle the reference (1, or NaN when a loaded machine
// made it miss every deadline of a phase), and the series and figure
// written. Its figures depend on the machine, so only their shape is
// checked.
func TestRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 1.7 s of real time")
	}
	t.Parallel()
	ticks := 0
	res, err := RealTime(context.Background(), RealTimeOptions{Seed: 1,
		Model:  IOModel{Capacity: 10, Base: 10 * time.Millisecond, Timeout: 200 * time.Millisecond},
		Warmup: 200 * time.Millisecond, Phase: 300 * time.Millisecond, Bin: 100 * time.Millisecond,
		Progress: func(elapsed, total time.Duration) { ticks++ }})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(res.Rows), len(OverloadContenders())*5; got != want {
		t.Fatalf("%d rows, want %d", got, want)
	}
	for _, r := range res.Rows {
		if r.Limiter == OracleName && r.GoodputRatio != 1 && !math.IsNaN(r.GoodputRatio) {
			t.Errorf("oracle at %s: goodput ratio %v, want 1 (or NaN)", r.Phase, r.GoodputRatio)
		}
		if r.ClassSuccess != nil {
			t.Errorf("%s at %s: class success %v, want none recorded", r.Limiter, r.Phase, r.ClassSuccess)
		}
	}
	if ticks == 0 {
		t.Error("Progress never called")
	}
	var table, series, svg bytes.Buffer
	if err := res.WriteTable(&table, "csv"); err != nil || !strings.HasPrefix(table.String(), "limiter,phase,goodput_ratio,") {
		t.Errorf("WriteTable: %v, %.40q", err, table.String())
	}
	if err := res.WriteSeries(&series); err != nil || !strings.HasPrefix(series.String(), "limiter,t_s,phase,limit,") {
		t.Errorf("WriteSeries: %v, %.40q", err, series.String())
	}
	if err := res.WriteSVG(&svg); err != nil || !strings.HasPrefix(svg.String(), "<svg ") {
		t.Errorf("WriteSVG: %v, %.40q", err, svg.String())
	}
	if d := res.RejectionP99("nosuch", "5x"); d != 0 {
		t.Errorf("RejectionP99 of no contender = %v, want 0", d)
	}
}

// TestRealTimeRefuses: the options are checked as the virtual scenario's
// are (no oracle, a bin longer than a phase), and a cancelled context
// ends the run with its error.
func TestRealTimeRefuses(t *testing.T) {
	for _, o := range []RealTimeOptions{
		{Contenders: OverloadContenders()[:2]},
		{Phase: time.Second, Bin: 2 * time.Second},
	} {
		if _, err := RealTime(context.Background(), o); err == nil {
			t.Errorf("RealTime(%+v): no error", o)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RealTime(ctx, RealTimeOptions{Phase: 100 * time.Millisecond, Bin: 50 * time.Millisecond}); !errors.Is(err, context.Canceled) {
		t.Errorf("RealTime(cancelled) = %v, want context.Canceled", err)
	}
}
