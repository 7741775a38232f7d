package redisinflight_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/inflighttest"
	"github.com/sluicehq/sluice/inflight/redisinflight"
)

// pair is one lease as both stores gave it.
type pair struct{ mem, red inflight.Lease }

// TestDifferential drives the memory store and the Redis store with the
// same random sequences of acquire, release (sometimes twice), renew, peek
// and clock steps, on one virtual clock (the Redis store's Options.Now),
// and demands identical answers: every Decision field, every lease's
// weight and expiry, every Renew error and every Peek. Expiry is
// compared exactly, since both stores read the same virtual time; what
// this does not check is Redis's own clock (TIME), which
// TestRedisClock covers.
func TestDifferential(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		for seed := range uint64(6) {
			t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
				c := inflighttest.NewClock(inflighttest.Epoch)
				mem := inflight.NewMemory(inflight.MemoryOptions{Now: c.Now, Shards: 2})
				red := newStore(t, e, redisinflight.Options{Now: c.Now})
				differential(t, seed, c, mem, red)
			})
		}
	})
}

func differential(t *testing.T, seed uint64, c *inflighttest.Clock, mem, red inflight.Store) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 99))
	keys := []string{"a", "b", "{c}", ""}
	held := map[string][]pair{}
	steps := 600
	// What the sequence exercised: a test that stopped reaching a case
	// would pass without checking it.
	var allowed, denied, unsatisfiable, renewed, renewExpired, peeks int
	for step := range steps {
		k := keys[r.IntN(len(keys))]
		switch op := r.IntN(20); {
		case op < 8:
			req := inflight.Request{Key: k, Cap: int64(r.IntN(7)), Weight: int64(r.IntN(4)),
				TTL: time.Duration(1+r.IntN(3000)) * time.Millisecond}
			ml, md, merr := mem.Acquire(ctx, req)
			rl, rd, rerr := red.Acquire(ctx, req)
			if merr != nil || rerr != nil {
				t.Fatalf("step %d: Acquire(%+v): memory %v, redis %v", step, req, merr, rerr)
			}
			if md != rd {
				t.Fatalf("step %d: Acquire(%+v): memory %+v, redis %+v", step, req, md, rd)
			}
			if ml.Held() != rl.Held() || ml.Weight != rl.Weight || !ml.Expiry.Equal(rl.Expiry) || ml.Key != rl.Key {
				t.Fatalf("step %d: Acquire(%+v) leases: memory %+v, redis %+v", step, req, ml, rl)
			}
			switch {
			case md.Allowed:
				allowed++
				held[k] = append(held[k], pair{ml, rl})
			case md.Unsatisfiable:
				unsatisfiable++
			default:
				denied++
			}
		case op < 12 && len(held[k]) > 0:
			i := r.IntN(len(held[k]))
			p := held[k][i]
			if r.IntN(5) > 0 {
				held[k] = append(held[k][:i], held[k][i+1:]...)
			}
			if err := mem.Release(ctx, p.mem); err != nil {
				t.Fatal(err)
			}
			if err := red.Release(ctx, p.red); err != nil {
				t.Fatal(err)
			}
		case op < 15 && len(held[k]) > 0:
			i := r.IntN(len(held[k]))
			p := held[k][i]
			ttl := time.Duration(1+r.IntN(3000)) * time.Millisecond
			ml, merr := mem.Renew(ctx, p.mem, ttl)
			rl, rerr := red.Renew(ctx, p.red, ttl)
			if !errors.Is(rerr, merr) && !(merr == nil && rerr == nil) {
				t.Fatalf("step %d: Renew: memory %v, redis %v", step, merr, rerr)
			}
			if merr != nil {
				renewExpired++
			} else {
				renewed++
				if !ml.Expiry.Equal(rl.Expiry) || ml.Weight != rl.Weight {
					t.Fatalf("step %d: Renew: memory %+v, redis %+v", step, ml, rl)
				}
				held[k][i] = pair{ml, rl}
			}
		case op < 17:
			mn, merr := mem.Peek(ctx, k)
			rn, rerr := red.Peek(ctx, k)
			if merr != nil || rerr != nil || mn != rn {
				t.Fatalf("step %d: Peek(%q): memory %d, %v; redis %d, %v", step, k, mn, merr, rn, rerr)
			}
			if mn > 0 {
				peeks++
			}
		default:
			c.Advance(time.Duration(r.IntN(700)) * time.Millisecond)
		}
	}
	if allowed == 0 || denied == 0 || unsatisfiable == 0 || renewed == 0 || renewExpired == 0 || peeks == 0 {
		t.Errorf("the sequence missed a case: %d allowed, %d denied, %d unsatisfiable, %d renewed, %d renewals of expired leases, %d non-zero peeks",
			allowed, denied, unsatisfiable, renewed, renewExpired, peeks)
	}
}

// TestRedisClock: with Redis's own clock (Options.Now unset), which the
// test cannot move, the same random sequences on one key with TTLs of an
// hour (nothing expires during the test) give the memory store's
// admissions and counts; RetryAfter, which depends on Redis's clock, is
// only checked to be within (0, TTL].
func TestRedisClock(t *testing.T) {
	both(t, func(t *testing.T, e env) {
		ctx := context.Background()
		mem := inflight.NewMemory(inflight.MemoryOptions{})
		red := newStore(t, e, redisinflight.Options{})
		r := rand.New(rand.NewPCG(7, 7))
		var held []pair
		for step := range 400 {
			if r.IntN(3) > 0 || len(held) == 0 {
				req := inflight.Request{Key: "clock", Cap: 5, Weight: int64(1 + r.IntN(2)), TTL: time.Hour}
				ml, md, _ := mem.Acquire(ctx, req)
				rl, rd, err := red.Acquire(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if md.Allowed != rd.Allowed || md.InFlight != rd.InFlight {
					t.Fatalf("step %d: memory %+v, redis %+v", step, md, rd)
				}
				if !rd.Allowed && (rd.RetryAfter <= 0 || rd.RetryAfter > time.Hour) {
					t.Fatalf("step %d: RetryAfter %v, want within (0, 1h]", step, rd.RetryAfter)
				}
				if rd.Allowed {
					if d := time.Until(rl.Expiry); d < 59*time.Minute || d > 61*time.Minute {
						t.Fatalf("step %d: expiry %v is %v away, want about an hour (Redis's clock)", step, rl.Expiry, d)
					}
					held = append(held, pair{ml, rl})
				}
				continue
			}
			i := r.IntN(len(held))
			mem.Release(ctx, held[i].mem)
			if err := red.Release(ctx, held[i].red); err != nil {
				t.Fatal(err)
			}
			held = append(held[:i], held[i+1:]...)
		}
	})
}
