// Package topk keeps the heaviest keys of a stream in fixed memory: who
// is denied most, by which rule, since when.
//
// A TopK is the Space-Saving algorithm (Metwally, Agrawal and El Abbadi,
// "Efficient Computation of Frequent and Top-k Elements in Data Streams",
// 2005): m counters; a key that has one is counted; a new key takes the
// counter of the smallest count c and starts at c+1, remembering c as
// its error. So every reported Count overestimates the key's true count
// by at most Err (Count-Err <= true <= Count), Err is at most N/m for a
// stream of N records, and every key whose true count exceeds N/m holds a
// counter: a heavy hitter is never lost in a flood of fresh keys.
//
// Bounds: the counters are allocated once (Options.Capacity of them, in
// Options.Shards shards), and a key is cut to Options.MaxKeyLen bytes and
// copied when it takes a counter, so a TopK holds at most
// Capacity·(MaxKeyLen+~100) bytes whatever the number of distinct keys.
//
// Record is the hot path: a key that holds a counter costs one shard lock,
// one map lookup and a heap fix, and does not allocate. Keys are spread
// over the shards by hash, each shard a Space-Saving summary of its share
// of the stream with Capacity/Shards counters (the bound above holds per
// shard: Err <= N_shard·Shards/Capacity). Top merges the shards.
package topk
