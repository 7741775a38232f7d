// Package layering has no code: its tests hold the repository to two
// tables. allowed (in layering_test.go) lists every package of the module
// and the module packages it may import, floor by floor, so that no import
// climbs: only cmd/sluice imports the transport (internal/transport/h2grpc);
// rls and httplimit never import each other; stores import no client,
// server or rules package; the core uses only the standard library.
// modules lists every third-party module and the packages that may import
// it directly, so Redis, gRPC and Prometheus stay where they are needed. A
// new package or dependency fails the tests until it has its row. The tests
// also keep the README's Go snippets honest (each is the body of a runnable
// example).
package layering
