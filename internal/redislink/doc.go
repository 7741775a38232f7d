// Package redislink is the one link to Redis that sluice's Redis stores
// (redisstore and inflight/redisinflight) share: a breaker per node (a
// standalone server is one node; a Cluster's primaries each one, named
// by the slot map the store reads), the caller trials that close a
// breaker as soon as Redis answers again, the background prober's
// schedule, and the Health it sums up.
//
// A breaker opens after Options.Threshold consecutive failed calls to its
// node. While it is open, calls to that node fail at once (the store's
// failure policy answers them) but for one caller per Options.Trial, whose
// request goes to Redis as the probe: its success closes the breaker.
// Keys on the other nodes of a Cluster keep going to Redis.
package redislink
