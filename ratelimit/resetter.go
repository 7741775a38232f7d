package ratelimit

import "context"

// Resetter is implemented by stores that can forget a key: Reset deletes
// key's state under every algorithm, so that its next request finds a full
// quota. It is the operator's "unblock this caller now"; a key that holds
// no state is not an error.
type Resetter interface {
	Reset(ctx context.Context, key string) error
}
