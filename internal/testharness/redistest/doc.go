// Package redistest starts real redis-server processes for tests: a
// standalone server, or a Redis Cluster of several masters, on free loopback
// ports, in temporary directories, with persistence off. Servers are
// stopped (killed and reaped) by t.Cleanup, or, for the servers shared by
// all the tests of a package, when Main's m.Run returns. On Linux a server
// also dies with the test process, so a crashed test leaks nothing.
//
// When redis-server is not installed the test is skipped, except under
// CI=true, where it fails: CI must not pass by skipping. StartValkey runs
// valkey-server instead, under the same rule (scripts/test fetches it).
//
// Tests sharing a server must use distinct keys; Prefix returns one per
// test.
//
// Servers can be killed and restarted on the same port (Kill, Restart), or
// stopped and continued (Pause, Resume: a hung server), for fault tests. Do talks RESP to a server without a client library, which is
// all the package needs to wait for readiness and for cluster_state:ok.
package redistest
