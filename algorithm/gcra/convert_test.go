package gcra_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/ratelimit"
)

func params(l ratelimit.Limit) *gcra.Params { p := gcra.NewParams(l); return &p }

func TestConvert(t *testing.T) {
	const now = int64(1_000_000 * time.Second)
	s := int64(time.Second)
	fifty, five := params(ratelimit.PerMinute(50)), params(ratelimit.PerMinute(5))
	for _, tc := range []struct {
		name      string
		tat, from int64
		p         *gcra.Params
		want      int64
	}{
		{"3 used at 12 s become 3 at 1.2 s", now + 36*s, 12 * s, fifty, now + 3600*int64(time.Millisecond)},
		{"2 and 11/12 used: the fraction rounds up", now + 35*s, 12 * s, fifty, now + 3500*int64(time.Millisecond)},
		{"full stays full", now - 5*s, 12 * s, fifty, now - 5*s},
		{"same interval: as it is", now + 7*s, int64(fifty.T), fifty, now + 7*s},
		{"unknown interval: adopted", now + 7*s, 0, fifty, now + 7*s},
		{"40 used at 1.2 s: a debt of 40 at 12 s", now + 48*s, fifty.T, five, now + 480*s},
		{"bounded by MaxPeriod", now + int64(ratelimit.MaxPeriod) - 1, 1, five, now + int64(ratelimit.MaxPeriod)},
		{"the clock went back past MaxPeriod: as it is", now + int64(ratelimit.MaxPeriod) + 5, 12 * s, fifty, now + int64(ratelimit.MaxPeriod) + 5},
	} {
		if got := gcra.Convert(tc.tat, now, tc.from, tc.p); got != tc.want {
			t.Errorf("%s: Convert = now%+d, want now%+d", tc.name, got-now, tc.want-now)
		}
	}
}

// TestConvertRoundTrip checks that converting to another interval and
// back never gives capacity: the backlog comes back at least as long.
func TestConvertRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const now = int64(1 << 60)
	for range 100000 {
		a := params(ratelimit.Limit{Rate: 1 + rng.Int64N(1000), Period: time.Duration(1 + rng.Int64N(int64(time.Hour))), Burst: 1 + rng.Int64N(100)})
		b := params(ratelimit.Limit{Rate: 1 + rng.Int64N(1000), Period: time.Duration(1 + rng.Int64N(int64(time.Hour))), Burst: 1 + rng.Int64N(100)})
		if a.T == 0 || b.T == 0 {
			continue
		}
		tat := now + rng.Int64N(a.Tau+1)
		there := gcra.Convert(tat, now, a.T, b)
		back := gcra.Convert(there, now, b.T, a)
		if back < tat {
			t.Fatalf("%d ns of backlog at %d ns an event, to %d ns and back: %d ns", tat-now, a.T, b.T, back-now)
		}
	}
}

func TestRefund(t *testing.T) {
	const now = int64(1_000_000 * time.Second)
	s := int64(time.Second)
	five := params(ratelimit.PerMinute(5))
	for _, tc := range []struct {
		name string
		tat  int64
		n    int64
		want int64
	}{
		{"one back", now + 36*s, 1, now + 24*s},
		{"exactly to full", now + 36*s, 3, now},
		{"never beyond full", now + 36*s, 4, now},
		{"huge n", now + 36*s, math.MaxInt64, now},
		{"full stays", now - s, 2, now - s},
		{"at most Burst back from a debt", now + 100*s, 9, now + 40*s},
		{"zero", now + 36*s, 0, now + 36*s},
	} {
		if got := gcra.Refund(tc.tat, now, tc.n, five); got != tc.want {
			t.Errorf("%s: Refund = now%+d, want now%+d", tc.name, got-now, tc.want-now)
		}
	}
}
