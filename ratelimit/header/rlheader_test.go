package header

import (
	"fmt"
	"maps"
	"testing"
)

func collect(mode Mode, ps []State) map[string]string {
	got := map[string]string{}
	Write(mode, ps, func(k, v string) {
		if _, dup := got[k]; dup {
			got[k] = "DUPLICATE"
			return
		}
		got[k] = v
	})
	return got
}

func TestWrite(t *testing.T) {
	a := State{Name: "per-user", Quota: 100, Window: 60, Remaining: 42, Reset: 17}
	b := State{Name: `q"x`, Quota: 5, Window: 1, Remaining: 3, Reset: 1}
	over := State{Name: "global", Quota: 10, Window: 60, Remaining: 0, Reset: 30, Over: true, RetryAfter: 12}
	for _, tc := range []struct {
		mode Mode
		ps   []State
		want map[string]string
	}{
		{IETF, []State{a}, map[string]string{Policy: `"per-user";q=100;w=60`, RateLimit: `"per-user";r=42;t=17`}},
		{IETF, []State{a, b}, map[string]string{Policy: `"per-user";q=100;w=60, "q\"x";q=5;w=1`, RateLimit: `"per-user";r=42;t=17, "q\"x";r=3;t=1`}},
		{IETF, []State{a, over}, map[string]string{Policy: `"per-user";q=100;w=60, "global";q=10;w=60`, RateLimit: `"per-user";r=42;t=17, "global";r=0;t=30`, RetryAfter: "12"}},
		// Legacy: the fewest remaining, or an over-limit policy outright.
		{Legacy, []State{a, b}, map[string]string{Limit: "5", Remaining: "3", Reset: "1"}},
		{Legacy, []State{b, over, a}, map[string]string{Limit: "10", Remaining: "0", Reset: "30", RetryAfter: "12"}},
		{Off, []State{a, over}, map[string]string{}},
		{IETF, nil, map[string]string{}},
		// Negative figures never show.
		{Legacy, []State{{Name: "n", Quota: 1, Remaining: -3, Reset: -1}}, map[string]string{Limit: "1", Remaining: "0", Reset: "0"}},
	} {
		if got := collect(tc.mode, tc.ps); !maps.Equal(got, tc.want) {
			t.Errorf("%v %+v:\n got %v\nwant %v", tc.mode, tc.ps, got, tc.want)
		}
	}
}

func TestWriteNamed(t *testing.T) {
	a := State{Name: "per-user", Quota: 100, Window: 60, Remaining: 42, Reset: 17}
	over := State{Name: "global", Quota: 10, Window: 60, Remaining: 0, Reset: 30, Over: true, RetryAfter: 12}
	for _, tc := range []struct {
		names Names
		mode  Mode
		ps    []State
		want  map[string]string
	}{
		// envoyproxy/ratelimit's names, and no Retry-After.
		{EnvoyNames, Legacy, []State{a, over}, map[string]string{EnvoyLimit: "10", EnvoyRemaining: "0", EnvoyReset: "30"}},
		{EnvoyNames, Legacy, []State{a}, map[string]string{EnvoyLimit: "100", EnvoyRemaining: "42", EnvoyReset: "17"}},
		// Renamed, partly: the empty name keeps its default, Retry-After stays.
		{Names{Limit: "X-Quota", Reset: "X-Quota-Reset"}, Legacy, []State{over},
			map[string]string{"X-Quota": "10", Remaining: "0", "X-Quota-Reset": "30", RetryAfter: "12"}},
		// Names touch the legacy mode only.
		{EnvoyNames, IETF, []State{over}, map[string]string{Policy: `"global";q=10;w=60`, RateLimit: `"global";r=0;t=30`, RetryAfter: "12"}},
		{EnvoyNames, Off, []State{over}, map[string]string{}},
	} {
		got := map[string]string{}
		WriteNamed(tc.mode, tc.names, tc.ps, func(k, v string) { got[k] = v })
		if !maps.Equal(got, tc.want) {
			t.Errorf("%v %+v %+v:\n got %v\nwant %v", tc.mode, tc.names, tc.ps, got, tc.want)
		}
	}
}

func BenchmarkWriteIETF(b *testing.B) {
	ps := []State{{Name: "per-user", Quota: 100, Window: 60, Remaining: 42, Reset: 17}, {Name: "global", Quota: 10, Window: 60, Remaining: 3, Reset: 30}}
	b.ReportAllocs()
	for b.Loop() {
		Write(IETF, ps, func(string, string) {})
	}
}

func ExampleWrite() {
	ps := []State{{Name: "per-user", Quota: 100, Window: 60, Remaining: 0, Reset: 17, Over: true, RetryAfter: 2}}
	Write(IETF, ps, func(name, value string) { fmt.Printf("%s: %s\n", name, value) })
	// Output:
	// RateLimit-Policy: "per-user";q=100;w=60
	// RateLimit: "per-user";r=0;t=17
	// Retry-After: 2
}
