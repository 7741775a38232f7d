package storeurl

import (
	"context"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/internal/redact"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// Memory is the URL of the in-process store.
const Memory = "memory"

// Options configures Open. The zero value is a good default.
type Options struct {
	// MaxKeys bounds the memory store (memstore.Options.MaxKeys: zero is
	// memstore.DefaultMaxKeys).
	MaxKeys int
	// Redis configures a Redis store. Its OnHealth is set by Open to log
	// when Redis is lost and back.
	Redis redisstore.Options
	// OnStoreError is the failure policy the server applies above a store
	// that returns its errors (Redis.OnError ratelimit.FailError: the gateway's
	// allow, deny and error), named in the logs; otherwise the logs name
	// Redis.OnError.
	OnStoreError ratelimit.FailurePolicy
	// Logger receives the store's health changes. Nil discards.
	Logger *slog.Logger
}

// policy names, for the logs, what answers while Redis is away.
func (o Options) policy() string {
	if o.Redis.OnError == ratelimit.FailError {
		return o.OnStoreError.String()
	}
	return o.Redis.OnError.String()
}

// Store is an opened store.
type Store struct {
	ratelimit.Store
	// Memory is the memory store, or nil; Redis the Redis store, or nil.
	Memory *memstore.Store
	Redis  *redisstore.Store
	// Prefetch is the Redis store's prefetch mode (URL parameter prefetch), or
	// nil; when set, it is the Store that decides.
	Prefetch *redisstore.Prefetch
	url      string

	viewMu   sync.Mutex
	view     *redisstore.Prefetch // PrefetchView's, when the URL has no prefetch
	inflight inflightCloser       // InFlight's
}

// PrefetchView returns a prefetch view of the Redis store, for the rules that
// ask for one (prefetch: true in a rules file) while the others stay exact:
// the store's own prefetch mode when its URL turned it on, else one made on
// first use with redisstore's default prefetch options (100 ms slices,
// over-admission at most 1% of a key's capacity with up to 10 instances),
// closed with the store. It is nil, with no error, for the memory store.
func (s *Store) PrefetchView() (*redisstore.Prefetch, error) {
	if s.Redis == nil {
		return nil, nil
	}
	if s.Prefetch != nil {
		return s.Prefetch, nil
	}
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.view == nil {
		l, err := redisstore.NewPrefetch(s.Redis, redisstore.PrefetchOptions{ExactOthers: true})
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", s.url, err)
		}
		s.view = l
	}
	return s.view, nil
}

// Open opens the store raw names ("" is memory). A Redis store opens even
// when no server answers, unless opts.Redis.RequireAtStart: its failure
// policy answers until Redis is back.
func Open(ctx context.Context, raw string, opts Options) (*Store, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if raw == "" || raw == Memory {
		m := memstore.New(memstore.Options{MaxKeys: opts.MaxKeys})
		return &Store{Store: m, Memory: m, url: Memory}, nil
	}
	ro := opts.Redis
	policy := opts.policy()
	safe := redact.URL(raw)
	for _, w := range Warnings(raw) {
		log.Warn("store: "+w, "store", safe)
	}
	raw, prefetch, err := takePrefetch(raw)
	if err != nil {
		return nil, fmt.Errorf("store %w", err)
	}
	raw, timeout, err := takeTimeout(raw)
	if err != nil {
		return nil, fmt.Errorf("store %w", err)
	}
	if timeout > 0 {
		ro.Timeout = timeout
	}
	if raw, err = takeLayout(raw, &ro); err != nil {
		return nil, fmt.Errorf("store %w", err)
	}
	if raw, err = takeCompatWindow(raw, &ro); err != nil {
		return nil, fmt.Errorf("store %w", err)
	}
	dial, tc, err := rewrite(raw)
	if err != nil {
		return nil, fmt.Errorf("store %w", err)
	}
	if tc != nil {
		if ro.TLSConfig != nil {
			// The URL's files over what the caller set.
			base := ro.TLSConfig.Clone()
			if tc.RootCAs != nil {
				base.RootCAs = tc.RootCAs
			}
			if len(tc.Certificates) > 0 {
				base.Certificates = tc.Certificates
			}
			tc = base
		}
		ro.TLSConfig = tc
	}
	next := ro.OnHealth
	ro.OnHealth = func(h redisstore.Health) {
		if h.Connected {
			log.Info("store: redis is back", "store", safe, "health", h.String())
		} else {
			log.Error("store: redis is unavailable; the failure policy answers", "store", safe, "on_store_error", policy, "health", h.String())
		}
		if next != nil {
			next(h)
		}
	}
	r, err := redisstore.Open(ctx, dial, ro)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", safe, err)
	}
	if h := r.Health(); !h.Connected {
		log.Error("store: redis is unavailable at start; serving with the failure policy and reconnecting in the background",
			"store", safe, "on_store_error", policy, "err", h.LastError)
	}
	st := &Store{Store: r, Redis: r, url: safe}
	if prefetch != nil {
		if err := st.prefetchMode(*prefetch, log); err != nil {
			r.Close()
			return nil, err
		}
	}
	return st, nil
}

// prefetchMode turns on the Redis store's prefetch mode (URL parameter
// prefetch) with o, and says so in the log.
func (s *Store) prefetchMode(o redisstore.PrefetchOptions, log *slog.Logger) error {
	l, err := redisstore.NewPrefetch(s.Redis, o)
	if err != nil {
		return fmt.Errorf("store %s: %w", s.url, err)
	}
	s.Store, s.Prefetch = l, l
	ttl, n := o.TTL, o.Instances
	if ttl == 0 {
		ttl = redisstore.DefaultPrefetchTTL
	}
	if n == 0 {
		n = redisstore.DefaultPrefetchInstances
	}
	log.Info("store: prefetch mode for hot keys (gcra, token_bucket, fixed_window; other algorithms exact)",
		"store", s.url, "slice_ttl", ttl.String(), "instances", n)
	return nil
}

// prefetchStats are the counters of the store's prefetch mode or view, zero
// without either.
func (s *Store) prefetchStats() redisstore.PrefetchStats {
	if s.Prefetch != nil {
		return s.Prefetch.Stats()
	}
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	if s.view != nil {
		return s.view.Stats()
	}
	return redisstore.PrefetchStats{}
}

// Close closes the store, and the in-flight store InFlight made.
func (s *Store) Close() error {
	s.viewMu.Lock()
	var err error
	if s.inflight != nil {
		err = s.inflight.Close()
		s.inflight = nil
	}
	s.viewMu.Unlock()
	if s.Memory != nil {
		return errors.Join(err, s.Memory.Close())
	}
	if s.Prefetch != nil {
		s.Prefetch.Close() // gives back the unspent slices, through Redis
	}
	s.viewMu.Lock()
	if s.view != nil {
		s.view.Close()
	}
	s.viewMu.Unlock()
	return errors.Join(err, s.Redis.Close())
}

// URL is the store's URL without its password.
func (s *Store) URL() string { return s.url }

// Ready reports whether the store decides for itself (a memory store
// always; a Redis store while connected) and says why in one line. A
// server stays up either way, its failure policy answering for Redis.
func (s *Store) Ready() (bool, string) {
	if s.Memory != nil {
		st := s.Memory.Stats()
		return true, fmt.Sprintf("store memory: %d keys of %d", st.Keys, st.MaxKeys)
	}
	h := s.Redis.Health()
	return h.Connected, "store " + s.url + ": " + h.String()
}

// Register adds the store's metrics to reg:
//
//	sluice_store_up                          1 while the store decides for itself (Redis connected), else 0
//	sluice_store_keys, sluice_store_max_keys the memory store's keys and their bound
//	sluice_store_evictions_total             memory keys dropped before their state had decayed
//	sluice_store_refusals_total              new memory keys refused (table full of state that must not be lost)
//	sluice_redis_failures_total              failed Redis calls, connection attempts and probes
//	sluice_redis_reconnects_total            times Redis came back
//	sluice_redis_policy_answers_total        requests the failure policy answered (Redis could not decide)
//	sluice_redis_script_calls_total, sluice_redis_requests_total   the mean batch is their ratio
//	sluice_redis_prefetch_local_total, _exact_total, _slices_total, _returned_total   prefetch mode's decisions (URL parameter prefetch, or rules with prefetch: true)
//	sluice_store_prefetch_keys                   the keys prefetch mode tracks
func (s *Store) Register(reg prometheus.Registerer) error {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "store", Name: name, Help: help}, f)
	}
	counter := func(sub, name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sluice", Subsystem: sub, Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{gauge("up", "1 while the store decides for itself (a memory store, or Redis connected); 0 while the failure policy answers.",
		func() float64 {
			if ok, _ := s.Ready(); ok {
				return 1
			}
			return 0
		})}
	if m := s.Memory; m != nil {
		cs = append(cs,
			gauge("keys", "Keys held by the memory store.", func() float64 { return float64(m.Stats().Keys) }),
			gauge("max_keys", "The memory store's bound on keys.", func() float64 { return float64(m.Stats().MaxKeys) }),
			counter("store", "evictions_total", "Memory store keys dropped to make room before their state had decayed.", func() float64 { return float64(m.Stats().Evictions) }),
			counter("store", "refusals_total", "New memory store keys refused because every key held state that must not be lost (the failure policy answered).", func() float64 { return float64(m.Stats().Refusals) }),
			counter("store", "journal_records_total", "Quota charges recorded in the memory store's journal (zero without one).", func() float64 { return float64(m.Stats().JournalRecords) }),
			counter("store", "journal_dropped_total", "Journal records dropped because the journal's buffer was full (the key's next record makes up for it).", func() float64 { return float64(m.Stats().JournalDropped) }),
			counter("store", "journal_errors_total", "Journal writes or syncs that failed (their records lost; the error is logged).", func() float64 { return float64(m.Stats().JournalErrors) }),
		)
	}
	if r := s.Redis; r != nil {
		cs = append(cs,
			counter("redis", "failures_total", "Failed Redis calls, connection attempts and probes.", func() float64 { return float64(r.Health().Failures) }),
			counter("redis", "reconnects_total", "Times Redis came back after being lost.", func() float64 { return float64(r.Health().Reconnects) }),
			counter("redis", "policy_answers_total", "Requests the failure policy (on_store_error) answered because Redis could not decide: a failed call, or the breaker of the key's node open.", func() float64 { return float64(r.Stats().PolicyAnswers) }),
			counter("redis", "script_calls_total", "Script calls sent to Redis (each decides a batch of requests).", func() float64 { return float64(r.Stats().ScriptCalls) }),
			counter("redis", "requests_total", "Requests decided by Redis, in all script calls.", func() float64 { return float64(r.Stats().Requests) }),
		)
	}
	if s.Redis != nil {
		// Prefetch mode's, whether the URL turned it on for every rule or
		// PrefetchView made it for the rules with prefetch: true (zero until then).
		cs = append(cs,
			counter("redis", "prefetch_local_total", "Decisions prefetch mode made in process, from a slice in hand or a remembered denial.", func() float64 { return float64(s.prefetchStats().Local) }),
			counter("redis", "prefetch_exact_total", "Decisions prefetch mode sent to Redis one by one (cold keys, small limits, other algorithms).", func() float64 { return float64(s.prefetchStats().Exact) }),
			counter("redis", "prefetch_slices_total", "Slices of a hot key's budget taken from Redis.", func() float64 { return float64(s.prefetchStats().Takes) }),
			counter("redis", "prefetch_returned_total", "Events of slices given back to Redis unspent.", func() float64 { return float64(s.prefetchStats().Returned) }),
			gauge("prefetch_keys", "Keys prefetch mode tracks (bounded by its MaxKeys).", func() float64 { return float64(s.prefetchStats().Keys) }),
		)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
