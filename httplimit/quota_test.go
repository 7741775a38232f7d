package httplimit

import (
	"testing"
	"time"

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
			lim, err := QuotaLimit(start, end, 1000)
			if err != nil {
				t.Fatalf("QuotaLimit(%v, %v) = %v", start, end, err)
			}
			p := int64(lim.Period)
			if w0, w1 := start.UnixNano()/p, (end.UnixNano()-1)/p; w0 != w1 {
				t.Errorf("QuotaLimit(%v, %v) period %v: windows %d and %d, want one", start, end, lim.Period, w0, w1)
			}
		}
	}
}
