// Package storeurl opens the store a server names by URL ("memory", or a
// redis://, rediss://, unix://, redis-cluster:// URL), exports its health
// and counters as Prometheus metrics and for a readiness check, and
// redacts its URL for logs. Both servers (sluice serve and sluice rls) open
// their store through it, so the two agree on what a store URL means, what
// happens when Redis is down at start (they start anyway: see
// redisstore's "Without Redis") and what an operator sees.
package storeurl
