package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

func TestReset(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	s := memstore.New(memstore.Options{Now: func() time.Time { return now }})
	defer s.Close()
	var rs ratelimit.Resetter = s
	for _, a := range ratelimit.Algorithms() {
		req := ratelimit.Request{Key: "k-" + a.String(), Limit: ratelimit.PerMinute(2), Algorithm: a, N: 2}
		if d, err := s.Apply(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("%v: first: got %+v %v", a, d, err)
		}
		if d, _ := s.Apply(ctx, req); d.Allowed {
			t.Fatalf("%v: second: got allowed, want denied", a)
		}
		if err := rs.Reset(ctx, req.Key); err != nil {
			t.Fatal(err)
		}
		if d, err := s.Apply(ctx, req); err != nil || !d.Allowed || d.Remaining != 0 {
			t.Errorf("%v: after reset: got %+v %v, want allowed with a full quota spent", a, d, err)
		}
	}
	if err := rs.Reset(ctx, "never-seen"); err != nil {
		t.Errorf("reset of an absent key: %v", err)
	}
	s.Close()
	if err := rs.Reset(ctx, "k"); err != ratelimit.ErrClosed {
		t.Errorf("reset after close: got %v, want ErrClosed", err)
	}
}
