package memstore

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestManyIntervals applies more distinct emission intervals than a store
// numbers (maxTag), so that the later ones share the overflow tag, and
// checks for each key, numbered or not: its burst, a limit change that
// keeps the event used (the state converted to the new interval), and a
// snapshot's round trip.
func TestManyIntervals(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	s := New(Options{Now: clock, SweepInterval: -1})
	defer s.Close()
	ctx := context.Background()
	const keys = maxTag + 60
	lim := func(i int, burst int64) ratelimit.Limit {
		return ratelimit.Limit{Rate: 1, Period: time.Duration(i+1) * time.Minute, Burst: burst}
	}
	check := func(s *Store, stage string, i int, l ratelimit.Limit, n, want int64, allowed bool) {
		t.Helper()
		d, err := s.Apply(ctx, ratelimit.Request{Key: fmt.Sprint("k", i), Limit: l, N: n})
		if err != nil || d.Allowed != allowed || d.Remaining != want {
			t.Fatalf("%s, key %d: %+v, %v; want allowed=%v remaining %d", stage, i, d, err, allowed, want)
		}
	}
	for i := range keys {
		check(s, "first", i, lim(i, 2), 1, 1, true)
		check(s, "second", i, lim(i, 2), 1, 0, true)
		check(s, "third", i, lim(i, 2), 1, 0, false)
	}
	if got := s.tags.n.Load(); got != maxTag {
		t.Fatalf("%d intervals numbered, want %d", got, maxTag)
	}
	// A limit of another interval and a burst of 3: the two events used
	// stay used (the backlog converted), one remains.
	for i := range keys {
		check(s, "after the change", i, lim(i+keys, 3), 0, 1, true)
	}
	var buf bytes.Buffer
	if err := s.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	r := New(Options{Now: clock, SweepInterval: -1})
	defer r.Close()
	if err := r.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		check(r, "restored", i, lim(i+keys, 3), 1, 0, true)
		check(r, "restored, then", i, lim(i+keys, 3), 1, 0, false)
	}
	if r.Len() != keys {
		t.Errorf("restored store holds %d keys, want %d", r.Len(), keys)
	}
}

// TestSnapshotSmallStore checks that a store of few shards, whose bucket
// slots hold fewer than 64 bits of a key's hash, finds its keys again when
// restored into a store of the same Options, and into one of a single
// shard.
func TestSnapshotSmallStore(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	opts := Options{Now: func() time.Time { return now }, SweepInterval: -1, MaxKeys: 200}
	s := New(opts)
	defer s.Close()
	if len(s.shards) >= 256 {
		t.Fatalf("%d shards; the test wants fewer than 256", len(s.shards))
	}
	ctx := context.Background()
	lim := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	for i := range 100 {
		if d, err := s.Apply(ctx, ratelimit.Request{Key: fmt.Sprint("k", i), Limit: lim, N: 1}); err != nil || !d.Allowed {
			t.Fatalf("key %d: %+v, %v", i, d, err)
		}
	}
	var buf bytes.Buffer
	if err := s.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	one := opts
	one.Shards, one.MaxKeys = 1, 0
	for _, o := range []Options{opts, one} {
		r := New(o)
		if err := r.Restore(bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		for i := range 100 {
			if d, err := r.Apply(ctx, ratelimit.Request{Key: fmt.Sprint("k", i), Limit: lim, N: 1}); err != nil || d.Allowed {
				t.Fatalf("%d shards, key %d after the restore: %+v, %v; want the spent bucket's denial", len(r.shards), i, d, err)
			}
		}
		r.Close()
	}
}
