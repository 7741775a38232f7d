package gctune

import (
	"flag"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func TestSize(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	for _, tc := range []struct {
		name string
		n    int
		env  map[string]string
		want int
	}{
		{"default", DefaultBytes, nil, DefaultBytes},
		{"GOGC set", DefaultBytes, map[string]string{"GOGC": "200"}, 0},
		{"GOGC off", DefaultBytes, map[string]string{"GOGC": "off"}, 0},
		{"GOMEMLIMIT set", DefaultBytes, map[string]string{"GOMEMLIMIT": "1GiB"}, 0},
		{"zero", 0, nil, 0},
		{"negative", -1, nil, 0},
	} {
		if got := Size(tc.n, env(tc.env)); got != tc.want {
			t.Errorf("%s: Size = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestKeepRaisesGoal: while a floor is kept, the collector's heap goal is
// above it (a count of bytes, read from runtime/metrics after a cycle).
func TestKeepRaisesGoal(t *testing.T) {
	const n = 64 << 20
	if Size(n, func(string) string { return "" }) != n {
		t.Fatal("Size refuses the floor with an empty environment")
	}
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	release := Keep(n)
	runtime.GC()
	if g := heapGoal(); g < n {
		t.Errorf("heap goal %d B with a floor of %d B kept, want at least the floor", g, n)
	}
	release()
}

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestPolicy: both flags on one flag set with the server's defaults, their
// range checks, and Apply setting the target percent until restore, but
// not when the operator set GOGC.
func TestPolicy(t *testing.T) {
	p := Policy{GCPercent: 400}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	p.AddFlags(fs)
	if err := fs.Parse([]string{"--heap-floor-mib", "8"}); err != nil {
		t.Fatal(err)
	}
	if p != (Policy{FloorMiB: 8, GCPercent: 400}) {
		t.Fatalf("after --heap-floor-mib 8: %+v, want the floor set and the default percent kept", p)
	}
	for _, bad := range []Policy{{FloorMiB: -1}, {FloorMiB: 1<<14 + 1}, {GCPercent: -1}} {
		if bad.Check() == nil {
			t.Errorf("Check(%+v) = nil, want an error", bad)
		}
	}
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	restore := Policy{GCPercent: 300}.Apply()
	if got := debug.SetGCPercent(300); got != 300 {
		t.Errorf("percent while applied = %d, want 300", got)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("percent after restore = %d, want 100", got)
	}
	t.Setenv("GOGC", "150")
	Policy{GCPercent: 300}.Apply()()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("percent with GOGC set = %d, want the runtime's own (100) untouched", got)
	}
}
