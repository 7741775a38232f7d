package redisinflight_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestDenyRetryAfterIsTheLinks: on a shared link, the deny policy's
// RetryAfter is the link's cooldown (the rate limit store's, whose
// breakers it shares), not the in-flight store's own BreakerCooldown,
// which that link replaces.
func TestDenyRetryAfterIsTheLinks(t *testing.T) {
	srv, client := ownServer(t)
	link := redislink.New(redislink.Options{Threshold: -1, Cooldown: 3 * time.Second, Unavailable: redisinflight.ErrUnavailable})
	s, err := redisinflight.New(client, redisinflight.Options{OnError: ratelimit.FailDeny, Timeout: 2 * time.Second,
		Link: link, BreakerCooldown: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Kill()
	_, d, err := s.Acquire(context.Background(), inflight.Request{Key: "k", Cap: 2, TTL: time.Minute})
	if err != nil || d.Allowed || d.RetryAfter != 3*time.Second {
		t.Fatalf("Acquire without Redis: %+v, %v; want denied, RetryAfter 3s (the link's cooldown)", d, err)
	}
}
