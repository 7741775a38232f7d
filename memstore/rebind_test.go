package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestRebind: a Bound changes its limit in place, and an invalid limit is
// the error Bind would return and changes nothing.
func TestRebind(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memstore.New(memstore.Options{Now: func() time.Time { return at }})
	defer s.Close()
	b, err := s.Bind(ratelimit.GCRA, ratelimit.PerMinute(1))
	if err != nil {
		t.Fatal(err)
	}
	rb, ok := b.(ratelimit.Rebinder)
	if !ok {
		t.Fatal("memstore's Bound is not a ratelimit.Rebinder")
	}
	ctx := context.Background()
	if err := rb.Rebind(ratelimit.Limit{Rate: -1, Period: time.Second}); !errors.Is(err, ratelimit.ErrInvalidLimit) {
		t.Errorf("Rebind(negative rate) = %v, want ErrInvalidLimit", err)
	}
	if d, _ := b.Take(ctx, "k", 0, 0); d.Limit != ratelimit.PerMinute(1) {
		t.Errorf("after an invalid Rebind the limit is %v, want 1/min", d.Limit)
	}
	if err := rb.Rebind(ratelimit.PerMinute(3)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, true, false} {
		if d, _ := b.Take(ctx, "k", 1, 0); d.Allowed != want || d.Limit != ratelimit.PerMinute(3) {
			t.Errorf("take %d after Rebind to 3/min: %+v, want allowed %v", i, d, want)
		}
	}
}
