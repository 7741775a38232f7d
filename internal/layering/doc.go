// Package layering has no code: its tests hold the repository to one table
// of allowed imports (allowed, in layering_test.go), which lists every
// package of the module and the module packages it may import. It follows
// DESIGN.md's layers and states the rules the layout depends on: only
// cmd/sluice imports the transport (internal/transport/h2grpc); rls and
// httplimit never import each other; stores import no client, server or
// rules package; the core uses only the standard library. A new package
// fails the test until it has a row. The tests also keep the README's Go
// snippets honest (each is the body of a runnable example).
package layering
