package redisstore

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/ratelimit"
)

var _ ratelimit.Resetter = (*Store)(nil)

// Reset deletes key's state under every algorithm (ratelimit.Resetter), in
// Redis, so that every instance sharing it sees a full quota at once. It
// also forgets the key in this process: its cached denial (DenyCache) and
// its state in the Local fallback store. Other processes' denial caches
// keep a denial they hold until its RetryAfter.
func (s *Store) Reset(ctx context.Context, key string) error {
	if s.closed.Load() {
		return ratelimit.ErrClosed
	}
	if s.deny != nil {
		s.deny.ForgetKey(key)
	}
	if s.local != nil {
		s.local.Reset(ctx, key)
	}
	cn := s.conn.Load()
	if cn == nil || s.link.Whole().Open() {
		return fmt.Errorf("%w: reset %q: not connected", ErrUnavailable, key)
	}
	keys := make([]string, 0, numShapes+2)
	for sh := range numShapes {
		keys = append(keys, s.key(sh, key))
	}
	// A fixed window's integer count: the marker names its key.
	mkey := s.markerKey(key)
	keys = append(keys, mkey)
	if m, err := cn.client.Do(ctx, cn.client.B().Get().Key(mkey).Build()).ToString(); err == nil {
		keys = append(keys, mkey+":"+m)
	}
	// The keys share a hash slot (the key is their hash tag).
	if err := cn.client.Do(ctx, cn.client.B().Del().Key(keys...).Build()).Error(); err != nil {
		return fmt.Errorf("%w: reset %q: %v", ErrUnavailable, key, err)
	}
	return nil
}
