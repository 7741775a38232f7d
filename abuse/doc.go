// Package abuse is sluice's abuse suite: each attack, tried
// as an attacker or an unlucky operator would, against the built binary.
// It has no code of its own, only tests.
//
// The tests build cmd/sluice once per run (go build, into a temporary
// directory), run `sluice serve` and `sluice rls` as subprocesses on
// loopback ports with config files written to temporary directories, and
// judge them from the outside: what reaches a counting upstream, what the
// client gets back, what /metrics says, what the process writes to its
// log, and its resident memory (VmRSS in /proc). Each test names its
// attack and the bound it holds the binary to; docs/security.md lists the
// bounds and the test that proves each.
//
// Tests that need Redis start a real redis-server with
// internal/testharness/redistest: skipped when it is not installed, failed under
// CI=true. Everything is bounded in time and in count, so that the whole
// package runs within a couple of minutes under -race:
//
//	go test -race ./abuse/
//
// A test whose defence has not landed in sluice yet is skipped with a
// message that says what is missing ("not fixed yet: ..."): found by
// probing the binary (a config setting or flag it refuses as unknown, a
// protocol setting it does not send), so that the test runs by itself
// once the defence exists; or, for a defect the suite found and reported,
// by an explicit t.Skip at the top of its test, to be removed with the
// fix.
package abuse
