// Package ratelimittest is the conformance suite every ratelimit.Store
// runs: timestamp tables per algorithm (redis-cell's CL.THROTTLE numbers for
// GCRA, golang.org/x/time/rate's admitted sequences for the token bucket,
// nginx limit_req's delays for the leaky bucket, the window formulas), edge
// cases (time going backwards, huge costs, zero and invalid limits, long and
// unicode keys), concurrent callers on one key (exactly the capacity, no lost
// updates), randomized invariants (never more than the bound, never
// negative remaining, an honest RetryAfter), limit changes and refunds, and
// a ratelimit.Limiter's reservations and in-place limit changes on the
// store (ReserveTables).
//
// A store's test calls Run with a constructor that builds a store on the
// given clock:
//
//	func TestConformance(t *testing.T) {
//		ratelimittest.Run(t, func(t *testing.T, now func() time.Time) ratelimit.Store {
//			s := memstore.New(memstore.Options{Now: now})
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
package ratelimittest
