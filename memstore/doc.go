// Package memstore keeps rate-limiter state in process memory: the embedded
// default store of sluice, for a single process or for tests and
// simulations with an injected clock.
//
// State is sharded by key hash and is tiny: a GCRA, token-bucket or
// leaky-bucket key is one 16-byte slot (hash and theoretical arrival time)
// of a flat table that requests for existing keys update without a lock;
// a window key is three int64s in a map behind the shard's mutex. A key whose state
// has decayed to a full quota is the same as an absent key, so the sweeper
// and eviction only ever drop what no longer matters first; memory is
// bounded by Options.MaxKeys.
//
// Snapshot and Restore carry state across a restart.
package memstore
