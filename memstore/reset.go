package memstore

import (
	"context"

	"github.com/sluicehq/sluice/ratelimit"
)

var _ ratelimit.Resetter = (*Store)(nil)

// Reset forgets key's state under every algorithm (ratelimit.Resetter):
// its next request finds a full quota.
func (s *Store) Reset(_ context.Context, key string) error {
	if s.closed.Load() {
		return ratelimit.ErrClosed
	}
	h := s.hash.sum(key)
	sh := s.shardOf(h)
	sh.mu.Lock()
	if e, _ := sh.tat.lookupKey(h, &s.tags); e != nil {
		sh.tat.remove(e)
	}
	if i := sh.win.find(h); i >= 0 {
		sh.win.remove(i)
	}
	if i := sh.logs.find(h); i >= 0 {
		sh.logs.remove(i)
	}
	sh.mu.Unlock()
	return nil
}
