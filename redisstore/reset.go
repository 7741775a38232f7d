package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

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
	keys := make([]string, 0, 2*numShapes+4)
	for sh := range numShapes {
		keys = append(keys, s.key(sh, key))
	}
	// A fixed window's marker form (Options.Now, and versions before):
	// the marker names its count's key.
	keys = s.appendCounter(ctx, cn, keys, s.markerKey(key))
	// The readable names of before compact ones (keys.go), until they
	// expire.
	for sh := range numShapes {
		if l := s.legacyKey(shapeInfo[sh].tag, key); l != "" {
			keys = append(keys, l)
		}
	}
	if l := s.legacyKey("m", key); l != "" {
		keys = s.appendCounter(ctx, cn, keys, l)
	}
	// The keys share a hash slot (the key is their hash tag), and so does
	// a packed state's hash.
	cmds := rueidis.Commands{cn.client.B().Del().Key(keys...).Build()}
	for _, a := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow} {
		if h, f, ok := s.Field(a, key); ok {
			cmds = append(cmds, cn.client.B().Hdel().Key(h).Field(f).Build())
		}
	}
	for _, r := range cn.client.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("%w: reset %q: %v", ErrUnavailable, key, err)
		}
	}
	return nil
}

// appendCounter appends the marker mkey and the key of the counter it
// names, if any.
func (s *Store) appendCounter(ctx context.Context, cn *conn, keys []string, mkey string) []string {
	keys = append(keys, mkey)
	if m, err := cn.client.Do(ctx, cn.client.B().Get().Key(mkey).Build()).ToString(); err == nil {
		keys = append(keys, mkey+":"+m)
	}
	return keys
}
