// Package loadgen is the HTTP load generator of bench/gateway: keep-alive
// clients, each connecting from its own loopback address (127.0.0.2 and
// up, so that a per-IP limit sees one identity per client), driving one
// URL either in a closed loop (each client sends its next request when
// the last one is answered: the most the server can do) or in an open
// loop at a fixed offered rate (requests are scheduled at rate/s whatever
// the answers do, and latency is measured from each request's scheduled
// time, so a server that falls behind is charged for the queue).
//
// Run also reads, over exactly the measured window, the CPU time of the
// processes it is given (the proxy under test, the upstream, redis-server)
// from /proc, so that CPU per request excludes the warm-up. cmd/gwload
// wraps it as a program, so that the load runs in its own process, apart
// from the processes it measures.
package loadgen
