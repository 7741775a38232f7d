// Package memstore keeps rate-limiter state in process memory: the embedded
// default store of sluice, for a single process or for tests and
// simulations with an injected clock.
//
// State is sharded by key hash and is tiny: a GCRA, token-bucket or
// leaky-bucket key is one 16-byte slot (its hash, whose top 8 bits tag the
// emission interval the state was made under, and the theoretical arrival
// time) of a flat table that requests for existing keys under the same
// interval update without a lock (a limit change converts the state under
// the lock); a fixed-window or sliding-counter key, or a sliding log of
// one entry, is one 24-byte slot of another flat table, behind the shard's
// mutex (its hash tagged with its period, the window's start or the
// entry's time, and its counts packed with its limit; counts too large for
// the slot and longer logs spill into a map). Keys are held as 64-bit hashes under a secret drawn per store,
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
// The zero Options are the fast configuration: the clock is read from a
// cached value that one goroutine per process stores every
// DefaultResolution (1 ms). Denials are decided on it, up to that much late
// (more when the goroutine is starved); an admission on a reading less
// than DefaultResolution behind the system clock at the call, whatever the
// scheduler does (the processor's counter tells when the cached one is
// that recent; else the system clock is read). So over any real interval
// of length L a store admits no more than its algorithm allows over L +
// DefaultResolution: a bucket at most Burst + Rate·(L + 1 ms)/Period
// (Options.Resolution gives each algorithm's bound).
//
// Snapshot and Restore (SaveSnapshot to a file) carry state across a
// restart; OpenJournal carries the changes to long-period window keys
// (calendar quotas) across a crash too: a journal beside the snapshot,
// written and synced every JournalOptions.Interval (1 s), replayed after
// the snapshot and compacted by SaveSnapshot, so that SIGKILL loses at
// most that interval of them.
package memstore
