package sim

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/shed"
)

// shedOverload is a bounded run of the oracle and the shedders: 20
// workers, 5 s phases (about 60,000 arrivals a contender).
func shedOverload(t *testing.T, seed uint64, so shedOptions) *overloadResult {
	t.Helper()
	so.Workers = 20
	sc, err := run(shedContenders, so)
	if err != nil {
		t.Fatal(err)
	}
	o := smallOverload(seed)
	o.Phase = 5 * time.Second
	o.SteadyAfter = time.Second
	o.Contenders = append(OverloadContenders()[:3], sc...) // gradient, vegas, oracle
	res, err := run(overload, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func rowsByName(res *overloadResult) map[string]OverloadRow {
	rows := map[string]OverloadRow{}
	for _, r := range res.Rows {
		rows[r.Limiter+"/"+r.Phase] = r
	}
	return rows
}

// TestOverloadShedTargets: the shedders' targets, with 30% critical
// traffic at 2x: at least 99.9% of the critical requests succeed, the
// lowest class is shed first, and goodput stays at the oracle's.
func TestOverloadShedTargets(t *testing.T) {
	res := shedOverload(t, 1, shedOptions{})
	if got, want := res.Classes, shed.DefaultClasses; len(got) != len(want) || got[0] != want[0] || got[3] != want[3] {
		t.Fatalf("classes %v, want %v", got, want)
	}
	rows := rowsByName(res)
	for _, name := range []string{"sluice-shed-fleet", "sluice-shed-stack", "sluice-shed-gradient"} {
		r := rows[name+"/2x"]
		t.Logf("%s at 2x: critical success %.6f, by class %.4f, goodput ratio %.3f", name, r.CriticalSuccess, r.ClassSuccess, r.GoodputRatio)
		if r.CriticalSuccess < 0.999 {
			t.Errorf("%s at 2x: critical success %.4f, want at least 0.999", name, r.CriticalSuccess)
		}
		if r.GoodputRatio < 0.95 {
			t.Errorf("%s at 2x: goodput ratio %.3f, want at least 0.95", name, r.GoodputRatio)
		}
		for c, s := range r.ClassSuccess[:3] {
			if s >= r.CriticalSuccess || s > 0.5 {
				t.Errorf("%s at 2x: class %s succeeds %.4f, critical %.4f: want the others shed", name, res.Classes[c], s, r.CriticalSuccess)
			}
		}
		// At 0.5x of 20 workers the in-flight count touches 20 now and
		// then, where the others are refused: not a false rejection.
		if r := rows[name+"/0.5x"]; r.CriticalSuccess != 1 || r.ClassSuccess[0] < 0.99 || r.FalseRejectRate > 0.001 {
			t.Errorf("%s at 0.5x: success %v, false rejections %v: want (nearly) everything", name, r.ClassSuccess, r.FalseRejectRate)
		}
		// At 5x the critical traffic alone is 1.5x capacity: they serve
		// what the server can.
		if r := rows[name+"/5x"]; r.CriticalSuccess < 0.6 || r.ClassSuccess[0] > 0.01 {
			t.Errorf("%s at 5x: success %v: want the critical class served first", name, r.ClassSuccess)
		}
	}
	// The stack sheds by class: test traffic before reads and writes.
	if s := rows["sluice-shed-stack/2x"].ClassSuccess; !(s[0] < s[1] && s[0] < s[2]) {
		t.Errorf("sluice-shed-stack at 2x: success by class %v: want test shed first", s)
	}
	// Limiters without priorities lose critical requests like any other,
	// and have no critical_success.
	g := rows["sluice-gradient/2x"]
	if !math.IsNaN(g.CriticalSuccess) || g.ClassSuccess[3] > 0.6 {
		t.Errorf("sluice-gradient at 2x: critical_success %v, success by class %v", g.CriticalSuccess, g.ClassSuccess)
	}
}

// TestOverloadShedUtilizationOrder: the utilization shedder on its own,
// with a ramp short enough for 5 s phases, sheds the classes in order.
// (With Stripe's 120 s ramp it barely moves in a 5 s phase: see
// docs/simulations.md.)
func TestOverloadShedUtilizationOrder(t *testing.T) {
	res := shedOverload(t, 2, shedOptions{Ramp: 2 * time.Second})
	r := rowsByName(res)["sluice-shed-utilization/2x"]
	s := r.ClassSuccess
	if !(s[0] <= s[1] && s[1] < s[2] && s[2] < s[3]) {
		t.Errorf("utilization at 2x: success by class %v: want increasing, test first", s)
	}
	if r.CriticalSuccess != s[3] {
		t.Errorf("critical success %v, class success %v", r.CriticalSuccess, s[3])
	}
}

func TestOverloadShedDeterministic(t *testing.T) {
	out := func(seed uint64) string {
		var b bytes.Buffer
		if err := shedOverload(t, seed, shedOptions{}).Table().Write(&b, "csv"); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if a := out(5); a != out(5) {
		t.Fatal("the same seed printed different bytes")
	} else if a == out(6) {
		t.Fatal("seeds 5 and 6 printed the same bytes")
	}
}

func TestClassMix(t *testing.T) {
	m := defaultClassMix()
	if m.Classes.Len() != 4 || m.Shares[3] != 0.3 || math.Abs(m.Shares[0]-0.7/3) > 1e-12 {
		t.Fatalf("default mix %v %v", m.Classes.Names(), m.Shares)
	}
	r := rand.New(rand.NewPCG(1, 2))
	n := make([]int, 4)
	for range 100_000 {
		n[m.draw(r)]++
	}
	for c, want := range m.Shares {
		if got := float64(n[c]) / 100_000; math.Abs(got-want) > 0.01 {
			t.Errorf("class %d drawn %.4f of the time, want %.4f", c, got, want)
		}
	}
	two, _ := shed.NewClasses("bulk", "critical")
	for _, bad := range []classMix{
		{Shares: []float64{1}},
		{Classes: two, Shares: []float64{0.5}},
		{Classes: two, Shares: []float64{0.5, 0.6}},
		{Classes: two, Shares: []float64{-0.5, 1.5}},
		{Classes: two, Shares: []float64{math.NaN(), 1}},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("mix %v: no error", bad.Shares)
		}
		if _, err := run(overload, overloadOptions{Mix: bad}); err == nil {
			t.Errorf("Overload with mix %v: no error", bad.Shares)
		}
	}
	for _, c := range []float64{-0.1, 1.1, math.NaN()} {
		if _, err := newClassMix(c, shed.Classes{}); err == nil {
			t.Errorf("newClassMix(%v): no error", c)
		}
	}
	one, _ := shed.NewClasses("all")
	if _, err := newClassMix(0.5, one); err == nil {
		t.Error("newClassMix(0.5) of one class: no error")
	}
	if m, err := newClassMix(1, one); err != nil || m.Shares[0] != 1 {
		t.Errorf("newClassMix(1) of one class: %v, %v", m.Shares, err)
	}
	for _, o := range []shedOptions{{}, {Workers: 10, Reserved: 1}, {Workers: 10, GradientReserved: -1},
		{Workers: 10, Ramp: -time.Second}, {Workers: 10, FleetCap: -1}} {
		if _, err := run(shedContenders, o); err == nil {
			t.Errorf("run(shedContenders, %+v): no error", o)
		}
	}
}
