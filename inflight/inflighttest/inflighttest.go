package inflighttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
)

// Clock is a virtual clock safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d (which may be negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Epoch is the time every test starts at.
var Epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// NewStore builds the store under test on the clock now. It should
// register the store's Close with t.Cleanup.
type NewStore func(t *testing.T, now func() time.Time) inflight.Store

// Run runs the conformance suite against the stores newStore builds.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		f    func(t *testing.T, s inflight.Store, c *Clock)
	}{
		{"CapAdmitsExactly", testCap},
		{"ReleaseFreesOneSlot", testRelease},
		{"ReleaseIsIdempotent", testReleaseIdempotent},
		{"ForgedLeaseFreesNothing", testForged},
		{"Weights", testWeights},
		{"ZeroCap", testZeroCap},
		{"LeaseFields", testLeaseFields},
		{"ExpiryReclaims", testExpiry},
		{"ExpiredLeaseReleasedLate", testReleaseLate},
		{"Renew", testRenew},
		{"RenewExpired", testRenewExpired},
		{"Peek", testPeek},
		{"KeysAreIndependent", testKeys},
		{"InvalidRequests", testInvalid},
		{"ClockBackwards", testBackwards},
		{"Concurrent", testConcurrent},
		{"Model", testModel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClock(Epoch)
			s := newStore(t, c.Now)
			tc.f(t, s, c)
		})
	}
}

var ctx = context.Background()

func acquire(t *testing.T, s inflight.Store, req inflight.Request) (inflight.Lease, inflight.Decision) {
	t.Helper()
	l, d, err := s.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("Acquire(%+v): %v", req, err)
	}
	if d.Allowed != l.Held() {
		t.Fatalf("Acquire(%+v) = %+v, %+v: Allowed and Held disagree", req, l, d)
	}
	return l, d
}

func release(t *testing.T, s inflight.Store, l inflight.Lease) {
	t.Helper()
	if err := s.Release(ctx, l); err != nil {
		t.Fatalf("Release(%+v): %v", l, err)
	}
}

func peek(t *testing.T, s inflight.Store, key string) int64 {
	t.Helper()
	n, err := s.Peek(ctx, key)
	if err != nil {
		t.Fatalf("Peek(%q): %v", key, err)
	}
	return n
}

func want(t *testing.T, what string, got, want inflight.Decision) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got %+v, want %+v", what, got, want)
	}
}

func testCap(t *testing.T, s inflight.Store, c *Clock) {
	req := inflight.Request{Key: "cap", Cap: 3, TTL: 10 * time.Second}
	for i := int64(1); i <= 3; i++ {
		_, d := acquire(t, s, req)
		want(t, fmt.Sprintf("acquire %d", i), d, inflight.Decision{Allowed: true, InFlight: i, Cap: 3})
		c.Advance(time.Second)
	}
	_, d := acquire(t, s, req)
	// The first lease expires 10 s after it was taken, 3 s ago.
	want(t, "acquire 4", d, inflight.Decision{InFlight: 3, Cap: 3, RetryAfter: 7 * time.Second})
	if got := d.Remaining(); got != 0 {
		t.Errorf("Remaining = %d, want 0", got)
	}
}

func testRelease(t *testing.T, s inflight.Store, c *Clock) {
	req := inflight.Request{Key: "rel", Cap: 2}
	a, _ := acquire(t, s, req)
	b, _ := acquire(t, s, req)
	if _, d := acquire(t, s, req); d.Allowed {
		t.Fatalf("third acquire admitted: %+v", d)
	}
	release(t, s, a)
	if got := peek(t, s, "rel"); got != 1 {
		t.Errorf("Peek after one release = %d, want 1", got)
	}
	c2, d := acquire(t, s, req)
	want(t, "acquire after release", d, inflight.Decision{Allowed: true, InFlight: 2, Cap: 2})
	release(t, s, b)
	release(t, s, c2)
	if got := peek(t, s, "rel"); got != 0 {
		t.Errorf("Peek after releasing all = %d, want 0", got)
	}
}

func testReleaseIdempotent(t *testing.T, s inflight.Store, c *Clock) {
	req := inflight.Request{Key: "idem", Cap: 2}
	a, _ := acquire(t, s, req)
	b, _ := acquire(t, s, req)
	release(t, s, a)
	release(t, s, a) // must not free b's slot
	release(t, s, a)
	if got := peek(t, s, "idem"); got != 1 {
		t.Errorf("Peek after releasing one lease three times = %d, want 1 (b's slot freed)", got)
	}
	release(t, s, inflight.Lease{})
	release(t, s, b)
	release(t, s, b)
	if got := peek(t, s, "idem"); got != 0 {
		t.Errorf("Peek = %d, want 0", got)
	}
	// A key emptied and used again: the old leases still free nothing.
	d2, _ := acquire(t, s, req)
	release(t, s, a)
	release(t, s, b)
	if got := peek(t, s, "idem"); got != 1 {
		t.Errorf("Peek after stale releases on a reused key = %d, want 1", got)
	}
	release(t, s, d2)
}

func testForged(t *testing.T, s inflight.Store, c *Clock) {
	req := inflight.Request{Key: "forge", Cap: 5, Weight: 2}
	l, _ := acquire(t, s, req)
	forged := []inflight.Lease{
		{Key: l.Key, ID: l.ID + 1, Weight: l.Weight, Expiry: l.Expiry},
		{Key: l.Key, ID: l.ID ^ 1<<40, Weight: l.Weight, Expiry: l.Expiry},
		{Key: l.Key, ID: l.ID, Weight: 1, Expiry: l.Expiry}, // a lighter weight
		{Key: "other", ID: l.ID, Weight: l.Weight, Expiry: l.Expiry},
		{Key: l.Key, ID: 12345, Weight: 2},
	}
	for _, f := range forged {
		if err := s.Release(ctx, f); err != nil {
			t.Errorf("Release(forged %+v): %v", f, err)
		}
	}
	if got := peek(t, s, "forge"); got != 2 {
		t.Errorf("Peek after forged releases = %d, want 2", got)
	}
	release(t, s, l)
	if got := peek(t, s, "forge"); got != 0 {
		t.Errorf("Peek after the real release = %d, want 0", got)
	}
}

func testWeights(t *testing.T, s inflight.Store, c *Clock) {
	req := func(w int64) inflight.Request { return inflight.Request{Key: "w", Cap: 10, Weight: w} }
	a, d := acquire(t, s, req(4))
	want(t, "weight 4", d, inflight.Decision{Allowed: true, InFlight: 4, Cap: 10})
	if a.Weight != 4 {
		t.Errorf("lease weight %d, want 4", a.Weight)
	}
	b, d := acquire(t, s, req(6))
	want(t, "weight 6", d, inflight.Decision{Allowed: true, InFlight: 10, Cap: 10})
	_, d = acquire(t, s, req(1))
	want(t, "weight 1 over the cap", d, inflight.Decision{InFlight: 10, Cap: 10, RetryAfter: inflight.DefaultTTL})
	_, d = acquire(t, s, req(11))
	want(t, "weight 11", d, inflight.Decision{InFlight: 10, Cap: 10, Unsatisfiable: true})
	release(t, s, b)
	_, d = acquire(t, s, req(7))
	want(t, "weight 7 after 6 left", d, inflight.Decision{InFlight: 4, Cap: 10, RetryAfter: inflight.DefaultTTL})
	e, d := acquire(t, s, req(6))
	want(t, "weight 6 after 6 left", d, inflight.Decision{Allowed: true, InFlight: 10, Cap: 10})
	release(t, s, a)
	release(t, s, e)
	// The zero weight is 1.
	l, d := acquire(t, s, inflight.Request{Key: "w", Cap: 10})
	if !d.Allowed || d.InFlight != 1 || l.Weight != 1 {
		t.Errorf("zero weight: %+v, %+v; want weight 1", l, d)
	}
	// The largest weight.
	big := inflight.Request{Key: "big", Cap: inflight.MaxCap, Weight: inflight.MaxCap - 1}
	_, d = acquire(t, s, big)
	want(t, "weight 2^53-1", d, inflight.Decision{Allowed: true, InFlight: inflight.MaxCap - 1, Cap: inflight.MaxCap})
	big.Weight = 1
	_, d = acquire(t, s, big)
	want(t, "then 1", d, inflight.Decision{Allowed: true, InFlight: inflight.MaxCap, Cap: inflight.MaxCap})
	_, d = acquire(t, s, big)
	if d.Allowed {
		t.Errorf("over 2^53 admitted: %+v", d)
	}
}

func testZeroCap(t *testing.T, s inflight.Store, c *Clock) {
	_, d := acquire(t, s, inflight.Request{Key: "zero", Cap: 0})
	want(t, "cap 0", d, inflight.Decision{Unsatisfiable: true})
	if got := peek(t, s, "zero"); got != 0 {
		t.Errorf("Peek = %d, want 0", got)
	}
}

func testLeaseFields(t *testing.T, s inflight.Store, c *Clock) {
	seen := map[uint64]bool{}
	for i := range 50 {
		ttl := time.Duration(i+1) * time.Second
		l, _ := acquire(t, s, inflight.Request{Key: "fields", Cap: 100, Weight: 2, TTL: ttl})
		if l.Key != "fields" || l.Weight != 2 || !l.Expiry.Equal(Epoch.Add(ttl)) || l.ID == 0 {
			t.Fatalf("lease %d = %+v; want key fields, weight 2, expiry %v, a non-zero ID", i, l, Epoch.Add(ttl))
		}
		if seen[l.ID] {
			t.Fatalf("lease %d repeats ID %d", i, l.ID)
		}
		seen[l.ID] = true
	}
	l, _ := acquire(t, s, inflight.Request{Key: "default-ttl", Cap: 1})
	if !l.Expiry.Equal(Epoch.Add(inflight.DefaultTTL)) {
		t.Errorf("zero TTL: expiry %v, want %v", l.Expiry, Epoch.Add(inflight.DefaultTTL))
	}
	_, d, err := s.Acquire(ctx, inflight.Request{Key: "default-ttl", Cap: 1})
	if err != nil || d.Allowed || d.RetryAfter != inflight.DefaultTTL {
		t.Errorf("denied: %+v, %v; want RetryAfter %v", d, err, inflight.DefaultTTL)
	}
}

func testExpiry(t *testing.T, s inflight.Store, c *Clock) {
	req := inflight.Request{Key: "exp", Cap: 2, TTL: 5 * time.Second}
	acquire(t, s, req) // a crashed holder: never released
	c.Advance(2 * time.Second)
	acquire(t, s, req)
	c.Advance(2999 * time.Millisecond)
	_, d := acquire(t, s, req)
	want(t, "1 ms before the first expiry", d, inflight.Decision{InFlight: 2, Cap: 2, RetryAfter: time.Millisecond})
	c.Advance(time.Millisecond)
	_, d = acquire(t, s, req)
	want(t, "at the first expiry", d, inflight.Decision{Allowed: true, InFlight: 2, Cap: 2})
	if got := peek(t, s, "exp"); got != 2 {
		t.Errorf("Peek = %d, want 2", got)
	}
	c.Advance(5 * time.Second)
	if got := peek(t, s, "exp"); got != 0 {
		t.Errorf("Peek after every TTL = %d, want 0", got)
	}
	_, d = acquire(t, s, req)
	want(t, "after every TTL", d, inflight.Decision{Allowed: true, InFlight: 1, Cap: 2})
}

func testReleaseLate(t *testing.T, s inflight.Store, c *Clock) {
	req := inflight.Request{Key: "late", Cap: 1, TTL: time.Second}
	a, _ := acquire(t, s, req)
	c.Advance(2 * time.Second)
	b, d := acquire(t, s, req) // a was reclaimed
	if !d.Allowed {
		t.Fatalf("after a's TTL: %+v", d)
	}
	release(t, s, a) // the slow holder comes back: frees nothing of b's
	if got := peek(t, s, "late"); got != 1 {
		t.Errorf("Peek after a late release = %d, want 1", got)
	}
	release(t, s, b)
}

func testRenew(t *testing.T, s inflight.Store, c *Clock) {
	req := inflight.Request{Key: "renew", Cap: 1, TTL: 10 * time.Second}
	l, _ := acquire(t, s, req)
	for i := range 5 {
		c.Advance(8 * time.Second)
		var err error
		l, err = s.Renew(ctx, l, 10*time.Second)
		if err != nil {
			t.Fatalf("renewal %d: %v", i, err)
		}
		if want := c.Now().Add(10 * time.Second); !l.Expiry.Equal(want) || l.Weight != 1 || l.Key != "renew" {
			t.Fatalf("renewal %d: %+v, want expiry %v", i, l, want)
		}
	}
	c.Advance(9 * time.Second)
	_, d := acquire(t, s, req)
	want(t, "40 s past the first TTL, renewed", d, inflight.Decision{InFlight: 1, Cap: 1, RetryAfter: time.Second})
	// A shorter renewal brings the expiry closer.
	l, err := s.Renew(ctx, l, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, d = acquire(t, s, req)
	want(t, "after a 2 s renewal", d, inflight.Decision{InFlight: 1, Cap: 1, RetryAfter: 2 * time.Second})
	// The zero ttl is DefaultTTL.
	l, err = s.Renew(ctx, l, 0)
	if err != nil || !l.Expiry.Equal(c.Now().Add(inflight.DefaultTTL)) {
		t.Errorf("Renew(0) = %+v, %v; want expiry %v", l, err, c.Now().Add(inflight.DefaultTTL))
	}
	// Invalid ttls.
	for _, ttl := range []time.Duration{-time.Second, time.Microsecond, inflight.MaxTTL + 1} {
		if _, err := s.Renew(ctx, l, ttl); !errors.Is(err, inflight.ErrInvalidRequest) {
			t.Errorf("Renew(ttl %v) = %v, want ErrInvalidRequest", ttl, err)
		}
	}
	// A lease that holds nothing renews without the store.
	z, err := s.Renew(ctx, inflight.Lease{Key: "renew", Weight: 1}, time.Second)
	if err != nil || z.Held() || !z.Expiry.Equal(c.Now().Add(time.Second)) {
		t.Errorf("Renew(lease holding nothing) = %+v, %v", z, err)
	}
}

func testRenewExpired(t *testing.T, s inflight.Store, c *Clock) {
	req := inflight.Request{Key: "renew-exp", Cap: 2, TTL: time.Second}
	a, _ := acquire(t, s, req)
	b, _ := acquire(t, s, req)
	c.Advance(time.Second)
	if _, err := s.Renew(ctx, a, time.Minute); !errors.Is(err, inflight.ErrExpired) {
		t.Errorf("Renew at the expiry = %v, want ErrExpired", err)
	}
	release(t, s, b)
	if _, err := s.Renew(ctx, b, time.Minute); !errors.Is(err, inflight.ErrExpired) {
		t.Errorf("Renew after release = %v, want ErrExpired", err)
	}
	if got := peek(t, s, "renew-exp"); got != 0 {
		t.Errorf("Peek = %d, want 0", got)
	}
	l, _ := acquire(t, s, req)
	forged := l
	forged.ID++
	if _, err := s.Renew(ctx, forged, time.Minute); !errors.Is(err, inflight.ErrExpired) {
		t.Errorf("Renew(forged) = %v, want ErrExpired", err)
	}
}

func testPeek(t *testing.T, s inflight.Store, c *Clock) {
	if got := peek(t, s, "never"); got != 0 {
		t.Errorf("Peek(unknown key) = %d, want 0", got)
	}
	acquire(t, s, inflight.Request{Key: "peek", Cap: 10, Weight: 3, TTL: time.Second})
	acquire(t, s, inflight.Request{Key: "peek", Cap: 10, Weight: 2, TTL: 2 * time.Second})
	if got := peek(t, s, "peek"); got != 5 {
		t.Errorf("Peek = %d, want 5", got)
	}
	c.Advance(time.Second)
	if got := peek(t, s, "peek"); got != 2 {
		t.Errorf("Peek after the first TTL = %d, want 2", got)
	}
	_, d := acquire(t, s, inflight.Request{Key: "peek", Cap: 10, Weight: 8})
	want(t, "after a peek", d, inflight.Decision{Allowed: true, InFlight: 10, Cap: 10})
}

func testKeys(t *testing.T, s inflight.Store, c *Clock) {
	keys := []string{"", "a", "A", "a:b", "{a}", "a}", "{", "}", "{}", "x{y}z", "ключ", "键", " ", "\x00", "a\x00b",
		strings.Repeat("k", 4096), "a\nb", "%s", "*", "user:42"}
	for _, k := range keys {
		if _, d := acquire(t, s, inflight.Request{Key: k, Cap: 1}); !d.Allowed {
			t.Errorf("key %q: first acquire denied: %+v", k, d)
		}
	}
	for _, k := range keys {
		if _, d := acquire(t, s, inflight.Request{Key: k, Cap: 1}); d.Allowed {
			t.Errorf("key %q: second acquire admitted: %+v", k, d)
		}
		if got := peek(t, s, k); got != 1 {
			t.Errorf("Peek(%q) = %d, want 1", k, got)
		}
	}
}

func testInvalid(t *testing.T, s inflight.Store, c *Clock) {
	bad := []inflight.Request{
		{Key: "k", Cap: -1},
		{Key: "k", Cap: 1, Weight: -1},
		{Key: "k", Cap: inflight.MaxCap + 1},
		{Key: "k", Cap: 1, Weight: inflight.MaxCap + 1},
		{Key: "k", Cap: 1, TTL: -time.Second},
		{Key: "k", Cap: 1, TTL: time.Microsecond},
		{Key: "k", Cap: 1, TTL: inflight.MaxTTL + time.Millisecond},
	}
	for _, r := range bad {
		l, d, err := s.Acquire(ctx, r)
		if !errors.Is(err, inflight.ErrInvalidRequest) || l.Held() || d.Allowed {
			t.Errorf("Acquire(%+v) = %+v, %+v, %v; want ErrInvalidRequest", r, l, d, err)
		}
	}
	if got := peek(t, s, "k"); got != 0 {
		t.Errorf("Peek after invalid requests = %d, want 0", got)
	}
	if _, d := acquire(t, s, inflight.Request{Key: "k", Cap: 1, TTL: inflight.MaxTTL}); !d.Allowed {
		t.Errorf("TTL MaxTTL denied: %+v", d)
	}
}

func testBackwards(t *testing.T, s inflight.Store, c *Clock) {
	req := inflight.Request{Key: "back", Cap: 1, TTL: 10 * time.Second}
	acquire(t, s, req)
	c.Advance(-time.Hour)
	_, d := acquire(t, s, req)
	if d.Allowed || d.InFlight != 1 {
		t.Errorf("after the clock went back an hour: %+v; want denied with 1 in flight", d)
	}
	c.Advance(time.Hour + 10*time.Second)
	if _, d := acquire(t, s, req); !d.Allowed {
		t.Errorf("after the TTL: %+v", d)
	}
}

// testConcurrent: goroutines enter and leave one key; never more than the
// cap in flight, and every slot comes back.
func testConcurrent(t *testing.T, s inflight.Store, c *Clock) {
	const capacity, workers, rounds = 4, 8, 60
	req := inflight.Request{Key: "conc", Cap: capacity, TTL: time.Hour}
	var held, peak, admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, d, err := s.Acquire(ctx, req)
				if err != nil {
					errs <- err
					return
				}
				if !d.Allowed {
					continue
				}
				admitted.Add(1)
				h := held.Add(1)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				if d.InFlight > capacity {
					errs <- fmt.Errorf("decision reports %d in flight, cap %d", d.InFlight, capacity)
					return
				}
				held.Add(-1)
				if err := s.Release(ctx, l); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if p := peak.Load(); p > capacity {
		t.Errorf("%d held at once, cap %d", p, capacity)
	}
	if admitted.Load() < capacity {
		t.Errorf("only %d admitted", admitted.Load())
	}
	if got := peek(t, s, "conc"); got != 0 {
		t.Errorf("Peek after every release = %d, want 0 (a slot leaked)", got)
	}
}

// model is the reference: the live leases of one key, in plain Go.
type model struct {
	leases map[uint64]modelLease
}

type modelLease struct {
	weight int64
	exp    time.Time
}

func (m *model) reap(now time.Time) {
	for id, l := range m.leases {
		if !l.exp.After(now) {
			delete(m.leases, id)
		}
	}
}

func (m *model) inflight() (n int64) {
	for _, l := range m.leases {
		n += l.weight
	}
	return n
}

func (m *model) earliest(now time.Time) time.Duration {
	var exps []time.Time
	for _, l := range m.leases {
		exps = append(exps, l.exp)
	}
	sort.Slice(exps, func(i, j int) bool { return exps[i].Before(exps[j]) })
	return exps[0].Sub(now)
}

// testModel drives a random sequence of acquire, release, renew, peek and
// clock steps on a few keys and checks every answer against the model.
func testModel(t *testing.T, s inflight.Store, c *Clock) {
	r := rand.New(rand.NewPCG(17, 3))
	keys := []string{"m0", "m1", "m2"}
	models := map[string]*model{}
	held := map[string][]inflight.Lease{}
	for _, k := range keys {
		models[k] = &model{leases: map[uint64]modelLease{}}
	}
	for step := range 1500 {
		k := keys[r.IntN(len(keys))]
		m := models[k]
		now := c.Now()
		switch op := r.IntN(10); {
		case op < 4:
			req := inflight.Request{Key: k, Cap: int64(1 + r.IntN(6)), Weight: int64(r.IntN(4)),
				TTL: time.Duration(1+r.IntN(20)) * 100 * time.Millisecond}
			l, d := acquire(t, s, req)
			m.reap(now)
			n := req.Normalize()
			wantD := inflight.Decision{InFlight: m.inflight(), Cap: req.Cap}
			switch {
			case n.Weight > req.Cap:
				wantD.Unsatisfiable = true
			case wantD.InFlight+n.Weight > req.Cap:
				wantD.RetryAfter = m.earliest(now)
			default:
				wantD.Allowed = true
				wantD.InFlight += n.Weight
				m.leases[l.ID] = modelLease{n.Weight, now.Add(n.TTL)}
				held[k] = append(held[k], l)
			}
			if d != wantD {
				t.Fatalf("step %d: Acquire(%+v) = %+v, want %+v", step, req, d, wantD)
			}
		case op < 6 && len(held[k]) > 0:
			i := r.IntN(len(held[k]))
			l := held[k][i]
			if r.IntN(4) > 0 { // sometimes released twice
				held[k] = append(held[k][:i], held[k][i+1:]...)
			}
			release(t, s, l)
			delete(m.leases, l.ID)
		case op < 8 && len(held[k]) > 0:
			i := r.IntN(len(held[k]))
			l := held[k][i]
			ttl := time.Duration(1+r.IntN(20)) * 100 * time.Millisecond
			got, err := s.Renew(ctx, l, ttl)
			ml, live := m.leases[l.ID]
			live = live && ml.exp.After(now)
			if !live {
				delete(m.leases, l.ID)
				if !errors.Is(err, inflight.ErrExpired) {
					t.Fatalf("step %d: Renew(%+v) of a lease not held = %+v, %v; want ErrExpired", step, l, got, err)
				}
				continue
			}
			if err != nil || !got.Expiry.Equal(now.Add(ttl)) {
				t.Fatalf("step %d: Renew(%+v, %v) = %+v, %v; want expiry %v", step, l, ttl, got, err, now.Add(ttl))
			}
			m.leases[l.ID] = modelLease{ml.weight, now.Add(ttl)}
			held[k][i] = got
		case op < 9:
			m.reap(now)
			if got, want := peek(t, s, k), m.inflight(); got != want {
				t.Fatalf("step %d: Peek(%q) = %d, want %d", step, k, got, want)
			}
		default:
			c.Advance(time.Duration(r.IntN(800)) * time.Millisecond)
		}
	}
}
