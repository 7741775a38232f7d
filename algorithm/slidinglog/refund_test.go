package slidinglog_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/ratelimit"
)

func TestLogRefund(t *testing.T) {
	s := int64(time.Second)
	l := slidinglog.NewLog([]slidinglog.Entry{{At: 1 * s, N: 2}, {At: 5 * s, N: 3}, {At: 9 * s, N: 1}})
	l.Refund(10*s, 10*time.Second, 2) // the newest (1) and one of the next (3)
	if got := l.Entries(); len(got) != 2 || got[1] != (slidinglog.Entry{At: 5 * s, N: 2}) {
		t.Fatalf("after refunding 2: %v, want [{1s 2} {5s 2}]", got)
	}
	l.Refund(12*s, 10*time.Second, 100) // the entry at 1 s has left; the rest goes
	if got := l.Entries(); len(got) != 0 {
		t.Fatalf("after refunding everything: %v, want empty", got)
	}
	d := l.Step(12*s, ratelimit.Request{Limit: ratelimit.Limit{Rate: 5, Period: 10 * time.Second}})
	if d.Remaining != 5 {
		t.Errorf("remaining %d, want 5", d.Remaining)
	}
}
