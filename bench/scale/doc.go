// Package scale answers the seed's design exercise (seed 003: 1,000
// requests a minute per key with a burst of 200, 100 million active keys,
// two regions, limit changes effective within 30 s) with measurements on
// real processes:
//
//   - Memory writes keys through redisstore, named as the rules engine
//     names them, into a real redis-server and reads what they cost (INFO
//     memory's used_memory, MEMORY USAGE), for every algorithm;
//     StringLayout says which part of a key dominates.
//   - Propagation starts several `sluice serve` (or `sluice rls`)
//     processes on one rules file (or one xDS management server), changes
//     the limit, and times how long each takes to enforce the new one.
//
// The commands are scale/cmd/scale-memory and scale/cmd/scale-propagate;
// docs/scale.md has the figures. The two-region design is simulated by
// `sluice sim regions` (package sim), not here.
package scale
