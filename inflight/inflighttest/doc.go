// Package inflighttest is the conformance suite every inflight.Store runs:
// admission up to the cap (weighted and not), release (idempotent, never
// freeing another holder's slots), expiry and reclaiming on a virtual
// clock, renewal, Peek, invalid requests, unusual keys, concurrent callers
// on one key (never more than the cap in flight), and a randomized model
// check against a reference in plain Go.
//
// A store's test calls Run with a constructor that builds a store on the
// given clock:
//
//	func TestConformance(t *testing.T) {
//		inflighttest.Run(t, func(t *testing.T, now func() time.Time) inflight.Store {
//			s := inflight.NewMemory(inflight.MemoryOptions{Now: now})
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite's times are whole milliseconds, the resolution every store
// keeps (the Redis store counts in microseconds).
package inflighttest
