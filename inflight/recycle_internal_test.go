package inflight

import (
	"context"
	"fmt"
	"testing"
)

// TestRecordsAreRecycled: with keys coming and going between held ones, a
// freed key's record goes on to serve a key with a lease in flight while a
// stale lease still points at it (the premise of
// TestStaleLeaseOnRecycledRecord), and releasing or renewing the stale
// lease then touches nothing.
func TestRecordsAreRecycled(t *testing.T) {
	ctx := context.Background()
	s := NewMemory(MemoryOptions{Shards: 1, MaxKeys: -1})
	stale, _, _ := s.Acquire(ctx, Request{Key: "a", Cap: 1})
	s.Release(ctx, stale)
	recycled := 0
	for i := range 20 {
		churn(s, i)
		key := fmt.Sprint("x", i)
		if _, d, _ := s.Acquire(ctx, Request{Key: key, Cap: 1}); !d.Allowed {
			t.Fatal(d)
		}
		if stale.ref.key == key && stale.ref.live > 0 {
			recycled++
			// The stale lease points at the record of a key with a lease
			// in flight: releasing it must free nothing.
			s.Release(ctx, stale)
			if n, _ := s.Peek(ctx, key); n != 1 {
				t.Fatalf("%s: Peek after a stale release on its recycled record = %d, want 1", key, n)
			}
			if _, err := s.Renew(ctx, stale, 0); err != ErrExpired {
				t.Fatalf("Renew(stale) = %v, want ErrExpired", err)
			}
		}
	}
	if recycled == 0 {
		t.Errorf("the stale lease's record never served a held key (it serves %q, %d leases)", stale.ref.key, stale.ref.live)
	}
}

// churn makes 2 to 5 keys come and go (a count that varies, so that the
// record freed last is a different one each time), pushing older idle keys out of the ring
// and their records to the spares.
func churn(s *Memory, i int) {
	for j := range 2 + i%4 {
		l, _, _ := s.Acquire(context.Background(), Request{Key: fmt.Sprint("churn", i, ".", j), Cap: 1})
		s.Release(context.Background(), l)
	}
}
