package redislink

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Defaults of the options both Redis stores take alike.
const (
	DefaultPrefix  = "sluice:"
	DefaultTimeout = 100 * time.Millisecond
)

// MinTTLWithNow is the shortest expiry of a key written by a store whose
// Options.Now is set: Redis expires keys on its own clock, which a
// simulated clock does not follow.
const MinTTLWithNow = 10 * time.Minute

// Base is what both Redis stores' Options say alike, with the same
// meaning and defaults: the key prefix, the bound on each call, the
// failure policy, and whether the process's clock replaces Redis's.
type Base struct {
	Prefix  string
	Timeout time.Duration
	OnError ratelimit.FailurePolicy
	Now     bool
}

// Check refuses a prefix with a brace (the stores hash-tag keys
// themselves) and an unknown failure policy, in errors prefixed with pkg,
// and sets the defaults of the prefix and the timeout (the breaker's are
// New's).
func (b *Base) Check(pkg string) error {
	if strings.ContainsAny(b.Prefix, "{}") {
		return fmt.Errorf("%s: prefix %q contains a brace", pkg, b.Prefix)
	}
	if b.OnError > ratelimit.FailLocal {
		return fmt.Errorf("%s: unknown failure policy %d", pkg, b.OnError)
	}
	if b.Prefix == "" {
		b.Prefix = DefaultPrefix
	}
	if b.Timeout <= 0 {
		b.Timeout = DefaultTimeout
	}
	return nil
}

// MinTTL is the shortest expiry of the keys a store writes, in
// milliseconds: MinTTLWithNow with the process's clock, else 1.
func (b Base) MinTTL() int64 {
	if b.Now {
		return MinTTLWithNow.Milliseconds()
	}
	return 1
}
