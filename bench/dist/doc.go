// Package dist compares distributed rate limiters as they are deployed:
// several instances answering the same limits. gubernator (GubernatorPeers
// instances peered by memberlist gossip on loopback, no shared store:
// each key is owned by one peer) against `sluice rls` and `sluice serve`
// as a decision endpoint (SluiceInstances instances of each on one
// redis-server).
//
// All are driven by one load client (Measure), its connections spread
// over the instances: grpc-go with requests marshalled once ahead, sent as
// bytes, so the client's cost per call is the same for gubernator and
// sluice rls; net/http for sluice serve's decision endpoint, asked as
// nginx's auth_request asks. Measure
// reports decisions per second, p50/p99 latency and the CPU time of every
// process of the contender (its servers and redis-server). Exact hammers
// one key whose limit is L a second from every instance at once and
// counts what was admitted against what the limit allows.
//
// gubernator is built from its Go module (gobuild.Gubernator), sluice from
// this tree. The command dist-compare runs the paired rounds; see
// docs/benchmarks.md for figures.
package dist
