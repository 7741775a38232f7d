package ratelimit

// Prefetchable is the one rule about what prefetch mode may decide
// (redisstore.Prefetch, a rule's prefetch: true, a Redis store URL's
// prefetch=on): a decision under a can be made from a slice of the key's
// budget charged to the shared store ahead of time. It returns nil for
// GCRA, TokenBucket and FixedWindow, and otherwise an error saying why,
// wrapping ErrInvalidRequest: a leaky bucket's delay is a place in a
// queue that only the shared state knows, and the sliding windows depend
// on when each event happened, which a slice taken ahead does not record.
// The Redis store's prefetch mode, the rules parser (and so sluice check
// and Set.Bind's input) and the docs all follow it.
func (a Algorithm) Prefetchable() error {
	switch a {
	case GCRA, TokenBucket, FixedWindow:
		return nil
	case LeakyBucket:
		return prefetchError("prefetch mode does not decide leaky_bucket (its delay is a place in a queue that only the shared store knows); use gcra or token_bucket")
	}
	return prefetchError("prefetch mode decides gcra, token_bucket and fixed_window, not " + a.String() + " (it depends on when each event happened, which a slice taken ahead does not record)")
}

// prefetchError is Prefetchable's answer: its text, wrapping
// ErrInvalidRequest.
type prefetchError string

func (e prefetchError) Error() string { return "ratelimit: " + string(e) }
func (e prefetchError) Unwrap() error { return ErrInvalidRequest }
