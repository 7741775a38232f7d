package topk

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultCapacity  = 256
	DefaultShards    = 8
	DefaultMaxKeyLen = 128
)

// Options configures a TopK. The zero value is a good default.
type Options struct {
	// Capacity is the number of counters (DefaultCapacity): the more, the
	// tighter the error bound and the longer the tail that is tracked.
	Capacity int
	// Shards is the number of independently locked summaries
	// (DefaultShards), at least 1 and at most Capacity.
	Shards int
	// MaxKeyLen cuts longer keys (DefaultMaxKeyLen bytes).
	MaxKeyLen int
	// Now is the clock of First and Last; nil means time.Now.
	Now func() time.Time
}

// Entry is one tracked key.
type Entry struct {
	Key string
	// Count is the key's count, an overestimate by at most Err: the true
	// count is in [Count-Err, Count].
	Count uint64
	Err   uint64
	// First is when the key took its counter (it may have been seen
	// before, while it had none: Err says how much that can be); Last is
	// its latest record.
	First, Last time.Time
}

// TopK is a fixed-memory summary of the heaviest keys of a stream. It is
// safe for concurrent use.
type TopK struct {
	seed   maphash.Seed
	shards []shard
	maxKey int
	now    func() time.Time
}

type counter struct {
	key         string
	count, err  uint64
	first, last int64 // Unix ns
	pos         int   // index in the shard's heap
}

type shard struct {
	mu    sync.Mutex
	idx   map[string]*counter
	heap  []*counter // min-heap by count
	slab  []counter
	total uint64
	_     [64]byte // keep shards' locks on separate cache lines
}

// New returns an empty TopK.
func New(opts Options) *TopK {
	if opts.Capacity <= 0 {
		opts.Capacity = DefaultCapacity
	}
	if opts.Shards <= 0 {
		opts.Shards = DefaultShards
	}
	opts.Shards = min(opts.Shards, opts.Capacity)
	if opts.MaxKeyLen <= 0 {
		opts.MaxKeyLen = DefaultMaxKeyLen
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	t := &TopK{seed: maphash.MakeSeed(), shards: make([]shard, opts.Shards), maxKey: opts.MaxKeyLen, now: opts.Now}
	per := opts.Capacity / opts.Shards
	for i := range t.shards {
		n := per
		if i < opts.Capacity%opts.Shards {
			n++
		}
		s := &t.shards[i]
		s.idx = make(map[string]*counter, n)
		s.heap = make([]*counter, 0, n)
		s.slab = make([]counter, n)
	}
	return t
}

// Record counts one occurrence of key, now.
func (t *TopK) Record(key string) { t.RecordAt(key, t.now()) }

// RecordAt counts one occurrence of key at the time at.
func (t *TopK) RecordAt(key string, at time.Time) {
	if len(key) > t.maxKey {
		key = key[:t.maxKey]
	}
	now := at.UnixNano()
	s := t.shardFor(key)
	s.mu.Lock()
	s.total++
	if c := s.idx[key]; c != nil {
		c.count++
		c.last = now
		s.down(c.pos)
		s.mu.Unlock()
		return
	}
	k := strings.Clone(key) // do not keep the caller's (longer) string alive
	if n := len(s.heap); n < len(s.slab) {
		c := &s.slab[n]
		*c = counter{key: k, count: 1, first: now, last: now, pos: n}
		s.heap = append(s.heap, c)
		s.idx[k] = c
		s.up(n)
		s.mu.Unlock()
		return
	}
	// Full: the smallest counter goes to the new key (Space-Saving).
	c := s.heap[0]
	delete(s.idx, c.key)
	c.key, c.err, c.first, c.last = k, c.count, now, now
	c.count++
	s.idx[k] = c
	s.down(0)
	s.mu.Unlock()
}

// shardFor is the shard that counts key (already cut to maxKey).
func (t *TopK) shardFor(key string) *shard {
	if len(t.shards) == 1 {
		return &t.shards[0]
	}
	return &t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
}

// Top returns the n heaviest keys, heaviest first (ties: the most recent
// first). n <= 0 means all tracked keys.
func (t *TopK) Top(n int) []Entry {
	var out []Entry
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for _, c := range s.heap {
			out = append(out, Entry{Key: c.key, Count: c.count, Err: c.err, First: time.Unix(0, c.first), Last: time.Unix(0, c.last)})
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// Total returns the number of records so far.
func (t *TopK) Total() uint64 {
	var n uint64
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += s.total
		s.mu.Unlock()
	}
	return n
}

// Capacity returns the number of counters.
func (t *TopK) Capacity() int {
	n := 0
	for i := range t.shards {
		n += len(t.shards[i].slab)
	}
	return n
}

func (s *shard) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].pos, s.heap[j].pos = i, j
}

func (s *shard) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].count <= s.heap[i].count {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *shard) down(i int) {
	n := len(s.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && s.heap[r].count < s.heap[l].count {
			m = r
		}
		if s.heap[i].count <= s.heap[m].count {
			return
		}
		s.swap(i, m)
		i = m
	}
}
