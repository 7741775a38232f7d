package redis_test

import (
	"fmt"

	"github.com/sluicehq/sluice/bench/redis"
)

// HashSlot is Redis Cluster's slot of a key, hash tag included: redisstore
// wraps each limiter key in braces, so the slot is that of the key the
// rules engine built.
func ExampleHashSlot() {
	fmt.Println(redis.HashSlot("user:1"), redis.HashSlot("sluice:t{user:1}"), redis.HashSlot("other{user:1}"))
	// Output: 10778 10778 10778
}

// SlotSpread shows how a key set falls on the primaries of a cluster
// whose slots are split evenly, as redis-cli --cluster create splits them.
func ExampleSlotSpread() {
	keys, _ := redis.ClusterKeys("rules-user", 30000, 1)
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = "sluice:t{" + k.Key + "}"
	}
	sp := redis.SlotSpread(names, redis.EvenSlots(3))
	fmt.Println(redis.EvenSlots(3))
	fmt.Println(sp.Keys, len(sp.PerPrimary), sp.Imbalance < 1.05)
	// Output:
	// [{0 5461 0} {5462 10922 1} {10923 16383 2}]
	// 30000 3 true
}
