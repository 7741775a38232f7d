package redisstore

import "github.com/sluicehq/sluice/internal/redislink"

// Health is what a Store knows of its connection to Redis, for a server's
// metrics and readiness detail (Store.Health): whether every node's
// breaker is closed (Connected) and since when, how many nodes' breakers
// are open (NodesDown), the last error, and counts of failures and
// reconnections. While a node's breaker is open, Apply answers the
// requests whose keys it serves with Options.OnError at once, without
// calling Redis, but for one caller's request per Options.BreakerTrial,
// which goes to Redis and closes the breaker when it answers; a
// background prober probes the node too. The breakers are the
// redislink package's, shared with the in-flight store of a server.
type Health = redislink.Health
