package rules_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rules"
)

func TestQuotaLimitCoversPeriod(t *testing.T) {
	t.Parallel()
	for _, period := range []string{rules.QuotaDay, rules.QuotaMonth} {
		for _, now := range []time.Time{
			time.Date(2026, 2, 14, 5, 0, 0, 0, time.UTC),
			time.Date(2026, 11, 30, 23, 59, 59, 0, time.UTC),
			time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC),
			time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC),
			time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
		} {
			start, end := rules.Quota{Period: period}.Window(now)
			lim, err := rules.QuotaLimit(start, end, 1000)
			if err != nil {
				t.Fatalf("rules.QuotaLimit(%v, %v) = %v", start, end, err)
			}
			p := int64(lim.Period)
			if w0, w1 := start.UnixNano()/p, (end.UnixNano()-1)/p; w0 != w1 {
				t.Errorf("rules.QuotaLimit(%v, %v) period %v: windows %d and %d, want one", start, end, lim.Period, w0, w1)
			}
		}
	}
}

// TestQuotaLimitLongSpans covers spans longer than ratelimit.MaxPeriod (a
// calendar year, ten years) with one fixed window of up to
// ratelimit.MaxWindow, which the stores take: on the memory store and a
// real Redis, the whole quota is spent at the span's first nanosecond and
// refused at its last, one window. A span that no window of at most
// MaxWindow covers is an error.
func TestQuotaLimitLongSpans(t *testing.T) {
	t.Parallel()
	year := func(y int) time.Time { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC) }
	stores := map[string]func(t *testing.T, now func() time.Time) ratelimit.Store{
		"memory": func(t *testing.T, now func() time.Time) ratelimit.Store {
			s := memstore.New(memstore.Options{Now: now})
			t.Cleanup(func() { s.Close() })
			return s
		},
		"redis": func(t *testing.T, now func() time.Time) ratelimit.Store {
			if testing.Short() {
				t.Skip("-short: no Redis")
			}
			redistest.Require(t)
			s, err := redisstore.Open(context.Background(), redistest.Start(t).URL(), redisstore.Options{Now: now, Prefix: redistest.Prefix(t), Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
	for _, span := range []struct{ start, end time.Time }{
		{year(2026), year(2027)}, // 365 days
		{year(2028), year(2029)}, // 366 days
		{year(2026), year(2036)}, // ten years
	} {
		const n = 1000
		lim, err := rules.QuotaLimit(span.start, span.end, n)
		if err != nil {
			t.Fatalf("rules.QuotaLimit(%v, %v) = %v", span.start, span.end, err)
		}
		p := int64(lim.Period)
		if lim.Period <= ratelimit.MaxPeriod || lim.Period > ratelimit.MaxWindow {
			t.Errorf("rules.QuotaLimit(%v, %v) period %v, want one past MaxPeriod, at most MaxWindow", span.start, span.end, lim.Period)
		}
		if w0, w1 := span.start.UnixNano()/p, (span.end.UnixNano()-1)/p; w0 != w1 {
			t.Errorf("rules.QuotaLimit(%v, %v) period %v: windows %d and %d, want one", span.start, span.end, lim.Period, w0, w1)
		}
		for name, open := range stores {
			t.Run(span.start.Format("2006")+"-"+span.end.Format("2006")+"/"+name, func(t *testing.T) {
				var mu sync.Mutex
				now := span.start
				clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
				store := open(t, clock)
				req := ratelimit.Request{Key: "quota", Limit: lim, Algorithm: ratelimit.FixedWindow, N: n}
				if err := req.Validate(); err != nil {
					t.Fatalf("Validate(%v) = %v", req, err)
				}
				if d, err := store.Apply(t.Context(), req); err != nil || !d.Allowed || d.Remaining != 0 {
					t.Fatalf("Apply(%d) at the span's start = %+v, %v; want allowed, none left", n, d, err)
				}
				mu.Lock()
				now = span.end.Add(-1)
				mu.Unlock()
				req.N = 1
				if d, err := store.Apply(t.Context(), req); err != nil || d.Allowed {
					t.Fatalf("Apply(1) at the span's last nanosecond = %+v, %v; want denied (the same window)", d, err)
				}
			})
		}
	}
	for _, span := range []struct{ start, end time.Time }{
		{year(2026), year(2062)}, // 36 years: no more than MaxWindow, but no window that long covers it
		{year(2026), year(2063)}, // 37 years: past MaxWindow
	} {
		if lim, err := rules.QuotaLimit(span.start, span.end, 1); err == nil {
			t.Errorf("rules.QuotaLimit(%v, %v) = %v, want an error", span.start, span.end, lim)
		}
	}
}
