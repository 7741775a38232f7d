package storeurl

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// InFlightOptions configures the in-flight store (Store.InFlight).
type InFlightOptions struct {
	// OnError is what the Redis store does when Redis cannot decide
	// (redisinflight.Options.OnError).
	OnError ratelimit.FailurePolicy
	// OnFull is what the memory store does for a new key when it is full
	// (inflight.MemoryOptions.OnFull).
	OnFull ratelimit.FailurePolicy
	// MaxKeys bounds the memory store's keys (inflight.MemoryOptions).
	MaxKeys int
	// Timeout bounds each Redis call (redisinflight.Options.Timeout).
	Timeout time.Duration
	// OnFailure, when set, is called with every failed Redis call.
	OnFailure func(error)
}

// InFlight returns the store of in-flight leases beside the rate limit
// store, for the callers' in-flight caps and the fleet shedder alike: an
// inflight.Memory with the memory store, else a Redis store on the rate
// limit store's client and link (one client, one breaker per node, one
// prober), made once that store has connected: Redis down at start must
// not keep a server from starting. Until then its calls fail with
// redisinflight.ErrUnavailable and the caller's failure policy answers
// (local then means allow: there is no local store before Redis was ever
// reached).
//
// The store is made on the first call, with that call's options; later
// calls return it whatever their options. It is closed with the Store.
func (s *Store) InFlight(o InFlightOptions) inflight.Store {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.inflight != nil {
		return s.inflight
	}
	if s.Memory != nil {
		s.inflight = inflight.NewMemory(inflight.MemoryOptions{MaxKeys: o.MaxKeys, OnFull: o.OnFull})
		return s.inflight
	}
	s.inflight = &lazyRedis{rs: s.Redis, opts: redisinflight.Options{OnError: o.OnError, Timeout: o.Timeout,
		Link: s.Redis.Link(), OnFailure: o.OnFailure}}
	return s.inflight
}

// inflightCloser is what InFlight's stores have of Close.
type inflightCloser interface {
	inflight.Store
	Close() error
}

// lazyRedis is the Redis in-flight store, made on the rate limit store's
// client once that store has connected (InFlight).
type lazyRedis struct {
	rs   *redisstore.Store
	opts redisinflight.Options

	mu     sync.Mutex
	st     *redisinflight.Store
	closed bool
}

func (l *lazyRedis) get() (*redisinflight.Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.st != nil {
		return l.st, nil
	}
	if l.closed {
		return nil, inflight.ErrClosed
	}
	client := l.rs.Client()
	if client == nil {
		return nil, fmt.Errorf("%w: not connected", redisinflight.ErrUnavailable)
	}
	st, err := redisinflight.New(client, l.opts)
	if err != nil {
		return nil, err
	}
	l.st = st
	return st, nil
}

func (l *lazyRedis) Acquire(ctx context.Context, req inflight.Request) (inflight.Lease, inflight.Decision, error) {
	st, err := l.get()
	if err != nil {
		return inflight.Lease{}, inflight.Decision{}, err
	}
	return st.Acquire(ctx, req)
}

func (l *lazyRedis) Release(ctx context.Context, ls inflight.Lease) error {
	st, err := l.get()
	if err != nil {
		return err
	}
	return st.Release(ctx, ls)
}

func (l *lazyRedis) Renew(ctx context.Context, ls inflight.Lease, ttl time.Duration) (inflight.Lease, error) {
	st, err := l.get()
	if err != nil {
		return inflight.Lease{}, err
	}
	return st.Renew(ctx, ls, ttl)
}

func (l *lazyRedis) Peek(ctx context.Context, key string) (int64, error) {
	st, err := l.get()
	if err != nil {
		return 0, err
	}
	return st.Peek(ctx, key)
}

func (l *lazyRedis) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.st == nil {
		return nil
	}
	err := l.st.Close() // the client stays the rate limit store's
	l.st = nil
	return err
}
