// Package dist compares distributed rate limiters as they are deployed:
// several instances answering the same limits. gubernator (GubernatorPeers
// instances peered by memberlist gossip on loopback, no shared store:
// each key is owned by one peer) against `sluice rls` (SluiceInstances
// instances on one redis-server).
//
// Both are driven by one load client (Measure: grpc-go with requests
// marshalled once ahead, sent as bytes, so the client's cost per call is
// the same for both), its connections spread over the instances. Measure
// reports decisions per second, p50/p99 latency and the CPU time of every
// process of the contender (its servers and redis-server). Exact hammers
// one key whose limit is L a second from every instance at once and
// counts what was admitted against what the limit allows.
//
// gubernator is built from its Go module (gobuild.Gubernator), sluice from
// this tree. The command dist-compare runs the paired rounds; see
// docs/benchmarks.md for figures.
package dist
