package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/sluicehq/sluice/ratelimit"
)

// call is one Apply waiting for its batch.
type call struct {
	key       string
	spec      spec
	n         int64
	sec, nsec int64 // now, when Options.Now is set
	lim       ratelimit.Limit
	done      chan struct{}
	d         ratelimit.Decision
	err       error
}

// group is what calls must share to go in one script call: the script and,
// on a cluster, the hash slot (a script's keys must live in one slot).
type group struct {
	shape shape
	slot  uint16
}

// batcher coalesces concurrent Applies into one script call per group, so
// that under load one round trip and one script run serve many decisions.
// A call waits for nothing but a free worker: with workers idle it goes out
// at once, alone; while all workers are busy, calls pile up and the next
// free worker takes up to max of them. Workers' calls share connections by
// rueidis's automatic pipelining.
type batcher struct {
	s       *Store
	max     int
	mu      sync.Mutex
	cond    *sync.Cond
	pending map[group][]*call
	order   []group // groups with pending calls, oldest first
	closed  bool
	wg      sync.WaitGroup
}

func newBatcher(s *Store, workers, max int) *batcher {
	b := &batcher{s: s, max: max, pending: make(map[group][]*call)}
	b.cond = sync.NewCond(&b.mu)
	b.wg.Add(workers)
	for range workers {
		go b.work()
	}
	return b
}

// submit queues c. It returns false when the batcher is closed.
func (b *batcher) submit(g group, c *call) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	q, ok := b.pending[g]
	if !ok || len(q) == 0 {
		b.order = append(b.order, g)
	}
	b.pending[g] = append(q, c)
	b.mu.Unlock()
	b.cond.Signal()
	return true
}

func (b *batcher) work() {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		for len(b.order) == 0 && !b.closed {
			b.cond.Wait()
		}
		if len(b.order) == 0 {
			b.mu.Unlock()
			return
		}
		g := b.order[0]
		b.order = b.order[1:]
		q := b.pending[g]
		take := q
		if len(q) > b.max {
			take = q[:b.max:b.max]
			b.pending[g] = q[b.max:]
			b.order = append(b.order, g)
		} else {
			delete(b.pending, g)
		}
		more := len(b.order) > 0
		b.mu.Unlock()
		if more {
			b.cond.Signal()
		}
		b.s.run(g, take)
	}
}

// close stops the workers after they have run what is queued.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cond.Broadcast()
	b.wg.Wait()
}

// run executes one batch and hands every call its result.
func (s *Store) run(g group, calls []*call) {
	err := s.exec(g, calls)
	if err != nil {
		for _, c := range calls {
			c.err = err
		}
	}
	s.brk.record(err)
	if err != nil && s.opts.OnFailure != nil {
		s.opts.OnFailure(err)
	}
	for _, c := range calls {
		close(c.done)
	}
}

func (s *Store) exec(g group, calls []*call) (err error) {
	defer func() {
		// The client library must not take the caller down with it.
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: client panicked: %v", ErrUnavailable, p)
		}
	}()
	keys := make([]string, len(calls))
	perNow := s.opts.Now != nil
	// The distinct specs, and each call's (from 1). A batch rarely holds
	// more than a few limits: a linear search is the fastest.
	specs := make([]spec, 0, 4)
	idx := make([]int, len(calls))
	for i, c := range calls {
		keys[i] = c.key
		j := 0
		for j < len(specs) && specs[j] != c.spec {
			j++
		}
		if j == len(specs) {
			specs = append(specs, c.spec)
		}
		idx[i] = j + 1
	}
	per := 2
	if perNow {
		per = 4
	}
	args := make([]string, 0, 3+4*len(specs)+per*len(calls))
	args = append(args, strconv.FormatInt(s.minTTL, 10), bit(perNow), strconv.Itoa(len(specs)))
	for _, sp := range specs {
		args = appendSpec(args, g.shape, sp)
	}
	for i, c := range calls {
		args = append(args, strconv.Itoa(idx[i]), strconv.FormatInt(c.n, 10))
		if perNow {
			args = append(args, strconv.FormatInt(c.sec, 10), strconv.FormatInt(c.nsec, 10))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	defer cancel()
	reply, err := s.scripts[g.shape].Exec(ctx, s.client, keys, args).AsIntSlice()
	if err != nil {
		return s.failure(err, len(calls))
	}
	for _, c := range calls {
		if c.d, reply, err = decodeNext(reply, c.lim, g.shape); err != nil {
			return err
		}
	}
	if len(reply) != 0 {
		return fmt.Errorf("%w: %d integers left over after %d decisions", ErrScript, len(reply), len(calls))
	}
	return nil
}
