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
	s.forget(s.hash.sum(key), true)
	return nil
}

// forget drops the key hashed to h from every table, and journals it when
// journal is set and a journaled key was dropped.
func (s *Store) forget(h uint64, journal bool) {
	sh := s.shardOf(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, _ := sh.tat.lookupKey(h, &s.tags); e != nil {
		sh.tat.remove(e)
	}
	if i := sh.win.find(h); i >= 0 {
		if j := s.journaled(sh.win.period(i, &s.periods)); j != nil && journal {
			j.reset(int(h>>s.shift), h)
		}
		sh.win.remove(i)
	}
	if i := sh.logs.find(h); i >= 0 {
		sh.logs.remove(i)
	}
}
