package abuse

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/retry"
)

// Attack (or bad luck): Redis dies under a gateway with on_store_error:
// deny. The deny answer used to be a 429 "rate limit exceeded" with
// RateLimit r=0;t=0 and no Retry-After: a client that honours the headers
// came straight back, and every client of the fleet did so in a loop for
// as long as Redis was away; the log line said on_store_error=error.
//
// Bound: the answer is 503 "limiter unavailable" (problem+json naming the
// cause) with Retry-After of the breaker's cooldown (1 s) and RateLimit
// t=1, so a client that honours Retry-After waits; one with a shorter
// maximum wait than the server asks gives up after one request instead of
// retrying (counted: one store error per Do, not one per attempt); the
// log names on_store_error=deny.
func TestDenyPolicyAnswersLimiterUnavailable(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	g := startServe(t, redisGatewayKey(t, rs.URL(), "deny", 1000, "deny"))
	c := client(t)
	if code, _, body := do(t, c, "GET", g.url+"/"); code != http.StatusOK {
		t.Fatalf("Redis up: %d %s", code, body)
	}
	rs.Kill()
	killed := time.Now()

	code, h, body := do(t, c, "GET", g.url+"/")
	if code != http.StatusServiceUnavailable || h.Get("Content-Type") != "application/problem+json" ||
		!strings.Contains(body, "limiter unavailable") {
		t.Fatalf("Redis killed, on_store_error deny: %d %s %s, want 503 problem+json naming the limiter unavailable", code, h.Get("Content-Type"), body)
	}
	if secs, err := strconv.Atoi(h.Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("Retry-After %q, want the breaker's cooldown (at least 1 s)", h.Get("Retry-After"))
	}
	if rl := h.Get("RateLimit"); !strings.Contains(rl, "r=0") || strings.Contains(rl, "t=0") {
		t.Errorf("RateLimit %q, want r=0 and a reset that is not now", rl)
	}

	// A client honouring Retry-After, whose longest wait is shorter than
	// the server asks: it stops after one request, with the delay in the
	// error, instead of retrying at once.
	before := scrape(t, g.admin).value(t, "sluice_gateway_store_errors_total", `rule="deny"`)
	err := retry.Do(context.Background(), retry.Options{MaxAttempts: 5, MaxDelay: 100 * time.Millisecond},
		func(ctx context.Context, _ int) error {
			code, h, _, err := tryDo(c, "GET", g.url+"/")
			if err != nil || code == http.StatusOK {
				return retry.Permanent(err)
			}
			d, _ := retry.RetryAfter(h, time.Now())
			return retry.WithDelay(fmt.Errorf("answer %d", code), d)
		})
	if !errors.Is(err, retry.ErrDelayTooLong) {
		t.Errorf("a client honouring Retry-After: %v, want it to stop on the server's delay", err)
	}
	if after := scrape(t, g.admin).value(t, "sluice_gateway_store_errors_total", `rule="deny"`); after-before != 1 {
		t.Errorf("requests that reached the store's failure during the client's retry loop: %v, want 1", after-before)
	}

	// The log names the policy that answers, once the breaker opens (a
	// few failures in a row: each try sends one more request).
	eventually(t, 10*time.Second, func() error {
		tryDo(c, "GET", g.url+"/")
		for _, l := range g.lines(killed.Add(-time.Second)) {
			if strings.Contains(l, "redis is unavailable") {
				if !strings.Contains(l, "on_store_error=deny") {
					return fmt.Errorf("the outage's log line names another policy: %s", l)
				}
				return nil
			}
		}
		return errors.New("no log line for the outage")
	})
}

// The same outage behind sluice rls --on-store-error deny: gRPC has no
// "unavailable" answer but an error (the error policy's, for Envoy's
// failure_mode_deny), so deny stays OVER_LIMIT (Envoy's 429); but its
// headers no longer say the quota is whole again (RateLimit t=0), and
// Retry-After is the breaker's cooldown.
func TestRLSDenyPolicyHeadersAfterRedisDies(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	r := startRLS(t, redisRules(t, 1000), "--store", rs.URL(), "--on-store-error", "deny", "--headers", "ietf")
	c := &http.Client{Timeout: 10 * time.Second}
	if code, body, err := r.tryDecide(c, "abuse", 1, [][2]string{{"k", "v"}}); err != nil || code != http.StatusOK {
		t.Fatalf("Redis up: %d %s %v", code, body, err)
	}
	rs.Kill()
	code, body, err := r.tryDecide(c, "abuse", 1, [][2]string{{"k", "v"}})
	if err != nil || code != http.StatusTooManyRequests {
		t.Fatalf("Redis killed, --on-store-error deny: %d %s %v, want 429 (OVER_LIMIT)", code, body, err)
	}
	if !strings.Contains(body, `r=0;t=1`) || !strings.Contains(body, `"Retry-After"`) {
		t.Errorf("OVER_LIMIT for a store that cannot decide: %s, want RateLimit r=0;t=1 (not t=0) and a Retry-After", body)
	}
}
