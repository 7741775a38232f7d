package heapfloor

import (
	"runtime"
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
