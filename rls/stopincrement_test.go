package rls_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/rls"
)

// TestStopIncrementWhenOverLimit replays envoyproxy/ratelimit's
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT (src/redis/fixed_cache_impl.go):
// when a descriptor of a request would go over its limit, the request's other
// descriptors are not charged and answer from their counts; when none would,
// all are charged.
func TestStopIncrementWhenOverLimit(t *testing.T) {
	forEachStore(t, "", func(t *testing.T, store storeFunc) {
		for _, stop := range []bool{false, true} {
			t.Run(fmt.Sprintf("stop=%v", stop), func(t *testing.T) { stopIncrement(t, store, stop) })
		}
	})
}

func stopIncrement(t *testing.T, store storeFunc, stop bool) {
	h := newHarness(t, store, rls.Options{StopIncrementWhenOverLimit: stop})
	// None would go over: both charged.
	resp := h.call(t, 0, d("user", "u"), d("general", "g"))
	if got, want := statusOf(resp.Statuses[0]), (st{ok, 2, 3, 30}); got != want {
		t.Fatalf("stop=%v: user = %+v, want %+v", stop, got, want)
	}
	if got, want := statusOf(resp.Statuses[1]), (st{ok, 0, 1, 30}); got != want {
		t.Fatalf("stop=%v: general = %+v, want %+v", stop, got, want)
	}
	// general would go over: with stop, user is not charged.
	resp = h.call(t, 0, d("user", "u"), d("general", "g"))
	if resp.OverallCode != over || resp.Statuses[1].Code != over {
		t.Fatalf("stop=%v: overall %v, general %v; want OVER_LIMIT", stop, resp.OverallCode, resp.Statuses[1].Code)
	}
	wantUser := st{ok, 1, 3, 30} // charged
	if stop {
		wantUser = st{ok, 2, 3, 30} // read, not charged
	}
	if got := statusOf(resp.Statuses[0]); got != wantUser {
		t.Errorf("stop=%v: user beside an over-limit general = %+v, want %+v", stop, got, wantUser)
	}
	wantUser.remaining--
	if got := statusOf(h.call(t, 0, d("user", "u")).Statuses[0]); got != wantUser {
		t.Errorf("stop=%v: user alone afterwards = %+v, want %+v", stop, got, wantUser)
	}
	// One descriptor alone: the same either way.
	if got, want := statusOf(h.call(t, 0, d("general", "g")).Statuses[0]), (st{over, 0, 1, 30}); got != want {
		t.Errorf("stop=%v: general alone = %+v, want %+v", stop, got, want)
	}
	// A shadow_mode rule going over spares the others too, as
	// upstream (its check ignores shadow mode); the answer is OK.
	h.call(t, 0, d("shadow", "s"))
	before := statusOf(h.call(t, 0, withHits(d("user", "v"), 0)).Statuses[0]).remaining
	resp = h.call(t, 0, d("user", "v"), d("shadow", "s"))
	if resp.OverallCode != ok {
		t.Errorf("stop=%v: with shadow over, overall = %v, want OK", stop, resp.OverallCode)
	}
	want := before - 1
	if stop {
		want = before
	}
	if got := resp.Statuses[0].LimitRemaining; got != want {
		t.Errorf("stop=%v: user beside an over-limit shadow rule: remaining %d, want %d", stop, got, want)
	}
}
