// Package memstore keeps rate-limiter state in process memory: the embedded
// default store of sluice, for a single process or for tests and
// simulations with an injected clock.
//
// State is sharded by key hash and is tiny: a GCRA, token-bucket or
// leaky-bucket key is one 16-byte slot (hash and theoretical arrival time)
// of a flat table that requests for existing keys update without a lock;
// a window key is three int64s and its limit in a map behind the shard's
// mutex. Keys are held as 64-bit hashes under a secret drawn per store,
// every mixing step of which depends on the secret, so no spelling of a
// key can make it share another's state but chance (about 1 in 2^64/n²
// for n keys).
//
// Memory is bounded: at most Options.MaxKeys keys and MaxBytesPerKey bytes
// a key. A key whose state has decayed to a full quota is the same as an
// absent key, so the sweeper drops such keys and a full store evicts them
// first; past them a full store evicts what costs least to forget (the
// least used share of a limit) and never a denial or a used long-period
// quota while it can find a cheaper key: with none, it refuses the new key
// with ErrFull rather than lift someone's limit, and the caller's failure
// policy applies. A flood of fresh identities cannot reset anyone's limit
// or quota. Stats reports keys, evictions and refusals for metrics.
//
// Snapshot and Restore carry state across a restart.
package memstore
