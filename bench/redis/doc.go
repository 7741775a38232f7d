// Package redis compares sluice's Redis store with the Redis rate limiters
// people would pick instead, against one local redis-server in one run:
// go-redis/redis_rate (GCRA in Lua, one round trip per decision) and
// envoyproxy/ratelimit's fixed-window pattern (a pipelined INCRBY and
// EXPIRE per decision). It also holds the measurement that chose sluice's
// client library (go-redis v9 or rueidis, the same script).
//
// The comparison is a program, so the contenders are interleaved in one
// process against one server:
//
//	cd bench && go run ./redis/cmd/redis-compare -callers 64 -duration 5s -rounds 3
//
// docs/bench-redis.md has the figures. The package's tests check that every
// contender decides correctly (each admits what its limit allows) so that
// the numbers compare working limiters.
package redis
