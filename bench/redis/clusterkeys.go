package redis

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
)

// SeedRules is the seed's exercise (seeds/003) as a rule file: 1,000
// requests a minute per caller with a burst of 200, a token bucket, for
// authenticated users (the gateway's identity action sends user=<id>) and
// for anonymous callers by IP (remote_address=<ip>).
const SeedRules = `domain: api
descriptors:
  - key: user
    rate_limit: {name: per-user, algorithm: token_bucket, unit: minute, requests_per_unit: 1000, burst: 200}
  - key: remote_address
    rate_limit: {name: per-ip, algorithm: token_bucket, unit: minute, requests_per_unit: 1000, burst: 200}
`

// KeySets names the key sets ClusterKeys builds.
var KeySets = []string{"rules-user", "rules-ip", "plain"}

// ClusterKey is one limiter key of a key set: the store request's Key (as
// a caller of the store passes it), its limit and algorithm.
type ClusterKey struct {
	Key       string
	Limit     ratelimit.Limit
	Algorithm ratelimit.Algorithm
}

// ClusterKeys returns n distinct keys of the named set, the same for the
// same seed:
//
//   - rules-user: the keys the rules engine builds for the gateway's
//     identity of authenticated callers, user=<id> in SeedRules
//     ("sl:token_bucket:60000ms:api_user_48213_"), with random numeric IDs;
//   - rules-ip: the same for anonymous callers, remote_address=<IPv4>,
//     random addresses;
//   - plain: what a library user passes to the store by hand, "user:<id>"
//     for IDs 1..n, with SeedRules' limit.
//
// The rules keys come from rules.Set.Resolve, the code both front doors
// run, so they are the keys a gateway or sluice rls would send to Redis.
func ClusterKeys(set string, n int, seed uint64) ([]ClusterKey, error) {
	cfg, err := rules.Parse("seed-rules.yaml", []byte(SeedRules))
	if err != nil {
		return nil, err
	}
	rs, err := rules.NewSet(cfg)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]ClusterKey, 0, n)
	seen := make(map[string]bool, n)
	var checks []rules.Check
	for len(out) < n {
		var entry rules.Entry
		switch set {
		case "rules-user":
			entry = rules.Entry{Key: "user", Value: strconv.FormatUint(rng.Uint64N(1e9), 10)}
		case "rules-ip":
			v := rng.Uint32()
			entry = rules.Entry{Key: "remote_address", Value: fmt.Sprintf("%d.%d.%d.%d", v>>24, v>>16&255, v>>8&255, v&255)}
		case "plain":
			r := cfg.Rules()[0]
			out = append(out, ClusterKey{Key: "user:" + strconv.Itoa(len(out)+1), Limit: r.Limit, Algorithm: r.Algorithm})
			continue
		default:
			return nil, fmt.Errorf("unknown key set %q (want one of %v)", set, KeySets)
		}
		checks, err = rs.Resolve(checks[:0], rules.Input{Domain: "api", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{entry}, Hits: 1}}})
		if err != nil {
			return nil, err
		}
		if len(checks) != 1 || checks[0].Kind != rules.Limited {
			return nil, fmt.Errorf("%v resolved to %v, not one limited check", entry, checks)
		}
		req := checks[0].Request
		if seen[req.Key] {
			continue
		}
		seen[req.Key] = true
		out = append(out, ClusterKey{Key: req.Key, Limit: req.Limit, Algorithm: req.Algorithm})
	}
	return out, nil
}

// HashSlot returns the Redis Cluster hash slot of a Redis key, hash tag
// included: the store's own (internal/redislink.Slot, which routes every
// batch), so that the package's tests check the store's routing against
// the server's CLUSTER KEYSLOT.
func HashSlot(key string) int { return int(redislink.Slot(key)) }

// SlotRange is a range of hash slots [Lo, Hi] served by one primary
// (Node: its index among the cluster's primaries).
type SlotRange struct{ Lo, Hi, Node int }

// EvenSlots returns the slot ranges of n primaries each given an equal
// share of the 16384 slots, the first ones one more when they do not
// divide evenly: how redis-cli --cluster create and redistest assign them.
func EvenSlots(n int) []SlotRange {
	var out []SlotRange
	lo := 0
	for i := range n {
		hi := lo + 16384/n - 1
		if i < 16384%n {
			hi++
		}
		out = append(out, SlotRange{lo, hi, i})
		lo = hi + 1
	}
	return out
}

// Spread is how a key set falls on hash slots and on primaries.
type Spread struct {
	Keys, Primaries int
	// UsedSlots is the number of slots holding at least one key, MaxSlot
	// the most keys in one slot and MeanSlot the mean over all 16384.
	UsedSlots int
	MaxSlot   int
	MeanSlot  float64
	// PerPrimary is the keys each primary holds; Imbalance the largest
	// over the mean (1 is perfect); Expected the imbalance a uniformly
	// hashed key set shows by chance: about 1 + e_p/√(keys/primaries),
	// e_p the expected largest of p standard normals.
	PerPrimary []int
	Imbalance  float64
	Expected   float64
}

// SlotSpread returns how the Redis keys fall on the slots and on the
// primaries that serve them (ranges, as CLUSTER SLOTS reports them).
func SlotSpread(redisKeys []string, ranges []SlotRange) Spread {
	var slots [16384]int
	for _, k := range redisKeys {
		slots[HashSlot(k)]++
	}
	primaries := 0
	for _, r := range ranges {
		primaries = max(primaries, r.Node+1)
	}
	sp := Spread{Keys: len(redisKeys), Primaries: primaries, PerPrimary: make([]int, primaries), MeanSlot: float64(len(redisKeys)) / 16384}
	for s, c := range slots {
		if c > 0 {
			sp.UsedSlots++
		}
		sp.MaxSlot = max(sp.MaxSlot, c)
		for _, r := range ranges {
			if s >= r.Lo && s <= r.Hi {
				sp.PerPrimary[r.Node] += c
			}
		}
	}
	if primaries > 0 && len(redisKeys) > 0 {
		mean := float64(len(redisKeys)) / float64(primaries)
		sp.Imbalance = float64(slices.Max(sp.PerPrimary)) / mean
		// The counts of p primaries over uniformly hashed keys are
		// multinomial: the largest exceeds the mean by about √mean·e_p,
		// e_p the expected largest of p independent standard normals
		// (0, 0.564, 0.846, 1.029 for p = 1..4; about √(2 ln p) beyond).
		e := []float64{0, 0, 0.5642, 0.8463, 1.0294}
		ep := math.Sqrt(2 * math.Log(float64(primaries)))
		if primaries < len(e) {
			ep = e[primaries]
		}
		sp.Expected = 1 + ep/math.Sqrt(mean)
	}
	return sp
}
