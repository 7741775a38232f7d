package sim

import (
	"math"
	"math/rand/v2"
	"time"
)

// epoch is the wall-clock instant of virtual time zero, for components that
// take a time.Time (memstore's Now) or Unix nanoseconds (the limiter steps).
// It is a whole hour (2023-11-14 22:00 UTC), so windows aligned to the Unix
// epoch, as the stores align them, of a second, a minute or an hour start
// at virtual time zero.
var epoch = time.Unix(472_222*3600, 0).UTC()

// engine is a discrete-event simulation: a virtual clock, a queue of events
// ordered by time (ties run in the order they were scheduled) and a seeded
// random source. Nothing in it reads the real clock, so a run is a pure
// function of its seed.
//
// The zero engine is not usable; call [newEngine]. An engine is not safe
// for concurrent use: run independent simulations in separate engines.
type engine struct {
	// Rand is the run's random source, a PCG seeded by newEngine. Scenarios draw
	// every random number from it, in event order.
	Rand *rand.Rand

	now time.Duration
	seq uint64
	q   queue
}

// newEngine returns a simulation at virtual time zero whose random source is the
// PCG generator seeded with (seed, stream). Use one stream per run so that
// runs are independent and can execute in any order.
func newEngine(seed, stream uint64) *engine {
	return &engine{Rand: rand.New(rand.NewPCG(seed, stream))}
}

// Now returns the virtual time elapsed since the start of the run.
func (s *engine) Now() time.Duration { return s.now }

// Time returns the virtual time as a wall-clock instant: epoch + Now.
func (s *engine) Time() time.Time { return epoch.Add(s.now) }

// At schedules f to run at virtual time t; a t in the past runs at Now.
// Events at the same time run in the order they were scheduled.
func (s *engine) At(t time.Duration, f func()) {
	if t < s.now {
		t = s.now
	}
	s.seq++
	s.q.push(event{at: t, seq: s.seq, f: f})
}

// After schedules f to run d from now.
func (s *engine) After(d time.Duration, f func()) { s.At(s.now+d, f) }

// Pending returns the number of scheduled events.
func (s *engine) Pending() int { return len(s.q) }

// Run runs events until none is left and returns the time of the last one.
func (s *engine) Run() time.Duration {
	for len(s.q) > 0 {
		s.step()
	}
	return s.now
}

// RunUntil runs every event scheduled at or before t, then sets the clock to
// t (if it is later than the last event).
func (s *engine) RunUntil(t time.Duration) {
	for len(s.q) > 0 && s.q[0].at <= t {
		s.step()
	}
	if t > s.now {
		s.now = t
	}
}

func (s *engine) step() {
	e := s.q.pop()
	s.now = e.at
	e.f()
}

// Normal returns |N(mean, sd)|, a draw from a normal distribution folded at
// zero: the network delay model of Brooker's simulator.
func (s *engine) Normal(mean, sd time.Duration) time.Duration {
	return time.Duration(math.Abs(s.Rand.NormFloat64()*float64(sd) + float64(mean)))
}

// Exp returns an exponentially distributed duration with the given mean:
// the gap between arrivals of a Poisson process.
func (s *engine) Exp(mean time.Duration) time.Duration {
	return time.Duration(s.Rand.ExpFloat64() * float64(mean))
}

type event struct {
	at  time.Duration
	seq uint64
	f   func()
}

// queue is a binary min-heap of events by (at, seq). It is container/heap's
// algorithm on a concrete type, to spare an allocation per event.
type queue []event

func (q queue) less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}

func (q *queue) push(e event) {
	*q = append(*q, e)
	h := *q
	for j := len(h) - 1; j > 0; {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (q *queue) pop() event {
	h := *q
	n := len(h) - 1
	e := h[0]
	h[0] = h[n]
	h[n] = event{}
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
	*q = h
	return e
}
