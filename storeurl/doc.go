// Package storeurl opens the store a server names by URL ("memory", or a
// redis://, rediss://, unix://, redis-cluster://, rediss-cluster:// or
// redis-sentinel:// URL), exports its health
// and counters as Prometheus metrics and for a readiness check, and
// redacts its URL for logs. Both servers (sluice serve and sluice rls) open
// their store through it, so the two agree on what a store URL means, what
// happens when Redis is down at start (they start anyway: see
// redisstore's "Without Redis") and what an operator sees. The store of
// in-flight leases (Store.InFlight: the gateway's in-flight caps and
// fleet shedder) is opened beside the rate limit store, on its Redis
// client and link when the URL names Redis: one client, one breaker per
// node, one prober for every store a server uses.
//
// Two URL forms are storeurl's own, rewritten for redisstore:
//
//   - rediss://host:port?tls_ca=FILE&tls_cert=FILE&tls_key=FILE (also
//     rediss-cluster://): the CA bundle the server's certificate must
//     chain to, and the client certificate and key a server with
//     tls-auth-clients asks for, read from files at Open.
//   - redis-sentinel://[user:password@]host:port[,host:port…]/MASTER[/DB]:
//     the master of the set MASTER, found through Redis Sentinel (the
//     host list is the sentinels', as envoyproxy/ratelimit's REDIS_TYPE=
//     sentinel REDIS_URL "MASTER,host:port,host:port"; user and password
//     are the master's, REDIS_AUTH). rueidis follows the master through
//     failovers. The sentinels themselves are asked without a password
//     or TLS.
package storeurl
