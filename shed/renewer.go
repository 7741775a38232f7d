package shed

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/internal/tick"
)

// Ticket is a request's slot in the fleet, from Enter: its lease, kept
// alive by the Fleet's one renewer until Leave. The zero Ticket holds
// nothing.
type Ticket struct {
	i   int32 // index + 1 into the Fleet's held leases; 0: none
	gen uint32
}

// Held reports whether t holds a slot in the fleet.
func (t Ticket) Held() bool { return t.i != 0 }

// held is the leases a Fleet's requests hold between Enter and Leave, in a
// set that is reused (its size is the most requests this process has had
// in flight at once, at most Cap) and renewed by one goroutine that runs
// only while the set holds leases.
type held struct {
	mu      sync.Mutex
	slots   []heldLease
	free    []int32 // indices of unused slots
	live    int
	pass    uint64 // renewal passes made
	running bool   // the renewer's goroutine is running
	closed  bool
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the running renewer returns; nil when none ran
	jobs    []renewJob    // the renewer's scratch
}

type heldLease struct {
	l     inflight.Lease
	gen   uint32
	stamp uint64 // the pass after which l was taken or last renewed
	live  bool
	lost  bool // the store no longer holds l: not renewed again
}

type renewJob struct {
	i   int
	gen uint32
	l   inflight.Lease
}

// Enter acquires a slot for a request of class c, as Acquire does, and
// keeps its lease alive until Leave: the Fleet renews every lease its
// requests hold from one goroutine, every TTL/3, a lease at most 2/3 of
// the TTL after it was taken or last renewed, so a request may run for
// as long as it needs. No goroutine, timer or allocation a request: the
// renewer starts with the first lease held and returns once none has been
// held for a renewal period; Close stops it. If the process dies, its
// leases expire in the store after the TTL. A lease the store reports
// expired (a renewal that came too late) is not renewed again; the request
// goes on, and its slot may go to another. The zero Ticket (denied, or an
// error) holds nothing.
func (f *Fleet) Enter(ctx context.Context, c Class) (Ticket, inflight.Decision, error) {
	l, d, err := f.Acquire(ctx, c)
	if err != nil || !l.Held() {
		return Ticket{}, d, err
	}
	return f.held.add(f, l), d, nil
}

// Leave ends t's request: its lease is released (whatever became of the
// request's context: the store bounds the call). Leave of the zero Ticket,
// or of a Ticket left already, does nothing.
func (f *Fleet) Leave(t Ticket) error {
	l, ok := f.held.remove(t)
	if !ok {
		return nil
	}
	return f.store.Release(context.Background(), l)
}

// Close stops the renewer and waits for it: the leases still held are no
// longer renewed and expire in the store after the TTL unless their
// requests Leave first. Enter and Leave work after Close. The store is the
// caller's to close. Close is idempotent.
func (f *Fleet) Close() error {
	h := &f.held
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	if h.stop != nil {
		close(h.stop)
	}
	done := h.done
	h.mu.Unlock()
	if done != nil {
		<-done
	}
	return nil
}

func (h *held) add(f *Fleet, l inflight.Lease) Ticket {
	h.mu.Lock()
	defer h.mu.Unlock()
	var i int32
	if n := len(h.free); n > 0 {
		i, h.free = h.free[n-1], h.free[:n-1]
	} else {
		h.slots = append(h.slots, heldLease{})
		i = int32(len(h.slots) - 1)
	}
	s := &h.slots[i]
	s.l, s.stamp, s.live, s.lost = l, h.pass, true, false
	h.live++
	if !h.running && !h.closed {
		h.running = true
		if h.stop == nil {
			h.stop = make(chan struct{})
		}
		h.done = make(chan struct{})
		go f.renew(h.stop, h.done, f.TTL()/3)
	}
	return Ticket{i: i + 1, gen: s.gen}
}

func (h *held) remove(t Ticket) (inflight.Lease, bool) {
	if t.i == 0 {
		return inflight.Lease{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := t.i - 1
	if int(i) >= len(h.slots) {
		return inflight.Lease{}, false
	}
	s := &h.slots[i]
	if !s.live || s.gen != t.gen {
		return inflight.Lease{}, false
	}
	l := s.l
	*s = heldLease{gen: s.gen + 1}
	h.free = append(h.free, i)
	h.live--
	return l, true
}

// renew is the renewer's goroutine: a pass every period until stop, or
// until a pass finds no lease held.
func (f *Fleet) renew(stop <-chan struct{}, done chan<- struct{}, period time.Duration) {
	defer close(done)
	tick.While(stop, period, func(time.Time) bool { return f.renewPass(period) })
}

// renewPass renews the held leases taken or renewed at least one full
// period ago (between one and two periods: at most 2/3 of the TTL). It
// reports false, marking the renewer stopped, when no lease is held.
func (f *Fleet) renewPass(period time.Duration) bool {
	h := &f.held
	h.mu.Lock()
	if h.live == 0 {
		h.running = false
		h.mu.Unlock()
		return false
	}
	h.pass++
	pass := h.pass
	jobs := h.jobs[:0]
	for i := range h.slots {
		if s := &h.slots[i]; s.live && !s.lost && s.stamp+2 <= pass {
			jobs = append(jobs, renewJob{i: i, gen: s.gen, l: s.l})
		}
	}
	h.jobs = jobs
	h.mu.Unlock()
	if len(jobs) == 0 {
		return true
	}
	ttl := f.TTL()
	for _, j := range jobs {
		ctx, cancel := context.WithTimeout(context.Background(), period)
		nl, err := f.store.Renew(ctx, j.l, ttl)
		cancel()
		h.mu.Lock()
		// The request may have left meanwhile (its slot another's now);
		// a renewal that failed otherwise (the store unreachable) is tried
		// again next pass.
		if s := &h.slots[j.i]; s.live && s.gen == j.gen {
			switch {
			case err == nil:
				s.l, s.stamp = nl, pass
			case errors.Is(err, inflight.ErrExpired):
				s.lost = true
			}
		}
		h.mu.Unlock()
	}
	return true
}
