package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestMemory writes 10k keys of every algorithm into a real redis-server
// and checks what Memory reports against what it must be: every key there,
// the rules engine's key's compact name as the Redis key, used_memory's growth at least
// MEMORY USAGE's (which leaves out the expires entry and the bucket
// arrays) and not absurdly more, and the layout model near the measure.
func TestMemory(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, a := range Algorithms {
		t.Run(a.String(), func(t *testing.T) {
			r, err := Memory(ctx, MemoryOptions{Addr: srv.Addr, Algorithm: a, Keys: 10_000, Samples: 200})
			if err != nil {
				t.Fatal(err)
			}
			if r.DBKeys < 10_000 || r.ExpiresCount != r.DBKeys {
				t.Errorf("DBSIZE %d, %d with an expiry; want every key of 10000, each expiring", r.DBKeys, r.ExpiresCount)
			}
			if want := "sl:" + a.String() + ":60000ms:api_user_" + UserID(0) + "_"; r.RuleKey != want {
				t.Errorf("rule key %q, want %q", r.RuleKey, want)
			}
			// The Redis key is the rule key's compact name: a hash, 29
			// or 30 bytes, a 32-byte allocation.
			if len(r.Example) == 0 || len(r.Example[0].Name) > 30 || strings.Contains(r.Example[0].Name, r.RuleKey) {
				t.Errorf("example keys %+v: want a compact name of %q, at most 30 bytes", r.Example, r.RuleKey)
			}
			if r.PerKey() < r.UsageMean || r.PerKey() > 3*r.UsageMean {
				t.Errorf("used_memory grew %.1f B/key, MEMORY USAGE %.1f: want between 1 and 3 times", r.PerKey(), r.UsageMean)
			}
			l8, ok := StringLayout(r.Example, r.Keys, r.DBKeys, 8)
			l16, _ := StringLayout(r.Example, r.Keys, r.DBKeys, 16)
			if ok != (a != ratelimit.SlidingWindowLog) {
				t.Errorf("model ok %v for %v", ok, a)
			}
			// A fixed window is one Redis key where a batched script
			// charged it first and two (a marker and an integer count)
			// where a lone charge went as plain commands; which, depends
			// on the load. The model is of the sampled user's layout, so
			// it applies only when every user has that layout.
			mixed := a == ratelimit.FixedWindow && int64(len(r.Example))*int64(r.Keys) != r.DBKeys
			if mixed {
				t.Logf("fixed window: %d Redis keys for %d keys, the sample has %d: the two layouts mixed, no model check", r.DBKeys, r.Keys, len(r.Example))
			}
			if ok && !mixed && (r.PerKey() < 0.75*l8.Total() || r.PerKey() > 1.25*l16.Total()) {
				t.Errorf("measured %.1f B/key, model %.1f (8-byte quantum) to %.1f (16)", r.PerKey(), l8.Total(), l16.Total())
			}
			if r.Projected(SeedKeys) <= SeedEstimate {
				t.Errorf("projected %.3g B for 100M keys, not above the seed's 1.6 GB of bare values", r.Projected(SeedKeys))
			}
		})
	}
	// The log grows with the requests a key holds.
	r1, err := Memory(ctx, MemoryOptions{Addr: srv.Addr, Algorithm: ratelimit.SlidingWindowLog, Keys: 1000, Hits: 1})
	if err != nil {
		t.Fatal(err)
	}
	r20, err := Memory(ctx, MemoryOptions{Addr: srv.Addr, Algorithm: ratelimit.SlidingWindowLog, Keys: 1000, Hits: 20})
	if err != nil {
		t.Fatal(err)
	}
	if r20.UsageMean <= r1.UsageMean || r20.Example[0].ValueBytes <= r1.Example[0].ValueBytes {
		t.Errorf("a log of 20 requests: %.0f B, %d value bytes; of one: %.0f B, %d", r20.UsageMean, r20.Example[0].ValueBytes, r1.UsageMean, r1.Example[0].ValueBytes)
	}
}

func TestSizeClass(t *testing.T) {
	for _, tt := range []struct{ n, q, want int }{
		{1, 16, 8}, {9, 16, 16}, {24, 16, 32}, {24, 8, 24}, {40, 8, 40}, {40, 16, 48},
		{59, 16, 64}, {65, 8, 80}, {129, 16, 160}, {161, 16, 192}, {300, 16, 320},
	} {
		if got := sizeClass(tt.n, tt.q); got != tt.want {
			t.Errorf("sizeClass(%d, %d) = %d, want %d", tt.n, tt.q, got, tt.want)
		}
	}
}

func TestQuantileFleet(t *testing.T) {
	ms := time.Millisecond
	r := PropagationResult{Lags: [][]time.Duration{{3 * ms, 1 * ms, 2 * ms}, {9 * ms, 4 * ms, 5 * ms}}}
	if got, want := r.All(), []time.Duration{ms, 2 * ms, 3 * ms, 4 * ms, 5 * ms, 9 * ms}; !slices.Equal(got, want) {
		t.Errorf("All = %v, want %v", got, want)
	}
	if got, want := r.Fleet(), []time.Duration{3 * ms, 9 * ms}; !slices.Equal(got, want) {
		t.Errorf("Fleet = %v, want %v", got, want)
	}
	for _, tt := range []struct {
		q    float64
		want time.Duration
	}{{0, ms}, {0.5, 3 * ms}, {0.9, 9 * ms}, {1, 9 * ms}} {
		if got := Quantile(r.All(), tt.q); got != tt.want {
			t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing")
	}
}

// TestPropagation runs each mode with two processes of the built binary
// and two changes: every instance must answer by every new limit (a
// process that never does fails the run).
func TestPropagation(t *testing.T) {
	ctx := context.Background()
	bin, err := BuildSluice(ctx, filepath.Join("..", ".."), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range Modes {
		t.Run(m, func(t *testing.T) {
			r, err := Propagation(ctx, PropagationOptions{Binary: bin, Mode: m, Instances: 2, Changes: 2,
				Interval: 100 * time.Millisecond, Log: os.Stderr})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Lags) != 2 || len(r.Lags[0]) != 2 {
				t.Fatalf("lags %v, want 2 changes × 2 instances", r.Lags)
			}
			for _, l := range r.All() {
				if l <= 0 {
					t.Errorf("lag %v", l)
				}
			}
		})
	}
	if _, err := Propagation(ctx, PropagationOptions{Binary: bin, Mode: "carrier-pigeon"}); err == nil {
		t.Error("an unknown mode is accepted")
	}
}

// TestMemoryServerClock backs Memory's method: a key written with Redis's
// clock (the default, EXAT expiry) costs what a key written with
// Options.Now (PX expiry, which Memory uses so that keys outlive the run)
// costs, for each state shape.
func TestMemoryServerClock(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, a := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
		usage := map[bool]int64{}
		for _, withNow := range []bool{false, true} {
			o := redisstore.Options{Timeout: 10 * time.Second} // a loaded machine, the race detector
			if withNow {
				o.Now = time.Now
			}
			s, err := redisstore.New(ctx, client, o)
			if err != nil {
				t.Fatal(err)
			}
			// The same key length either way; the whole burst spent, so
			// the server-clock key lives seconds, not one.
			key := fmt.Sprintf("sl:%s:60000ms:api_user_%016x_", a, map[bool]int{false: 1, true: 2}[withNow])
			d, err := s.Apply(ctx, ratelimit.Request{Key: key, Limit: SeedLimit, Algorithm: a, N: 200})
			if err != nil || !d.Allowed {
				s.Close()
				t.Fatalf("%v: %+v, %v", a, d, err)
			}
			ks, err := stateKeys(ctx, client, s, key)
			s.Close()
			if err != nil || len(ks) != 1 {
				t.Fatalf("%v: state keys %+v, %v", a, ks, err)
			}
			ttl, err := client.Do(ctx, client.B().Pttl().Key(ks[0].Name).Build()).AsInt64()
			if err != nil || ttl <= 0 {
				t.Fatalf("%v: PTTL %d, %v; want an expiry", a, ttl, err)
			}
			usage[withNow] = ks[0].Usage
		}
		if usage[false] != usage[true] {
			t.Errorf("%v: MEMORY USAGE %d with Redis's clock, %d with Options.Now", a, usage[false], usage[true])
		}
	}
}

func TestInfoFields(t *testing.T) {
	info := "# Memory\r\nused_memory:193044512\r\nused_memory_human:184.10M\r\nmem_allocator:jemalloc-5.3.0\r\n"
	if got := infoField(info, "used_memory"); got != "193044512" {
		t.Errorf("used_memory %q", got)
	}
	if got := infoField(info, "mem_allocator"); got != "jemalloc-5.3.0" {
		t.Errorf("mem_allocator %q", got)
	}
	if got := infoField(info, "used_memory_rss"); got != "" {
		t.Errorf("absent field %q", got)
	}
	if got := keyspaceExpires("# Keyspace\r\ndb0:keys=1000000,expires=999999,avg_ttl=599000\r\n"); got != 999999 {
		t.Errorf("expires %d", got)
	}
	if got := keyspaceExpires("# Keyspace\r\n"); got != 0 {
		t.Errorf("empty keyspace: expires %d", got)
	}
}

// FuzzInfo: the INFO readers never panic, and a field written as
// name:value on a line of its own is read back.
func FuzzInfo(f *testing.F) {
	f.Add("used_memory", "193044512", "# Memory\r\nused_memory_rss:1\r\n")
	f.Add("db0", "keys=1,expires=1,avg_ttl=0", "")
	f.Add("x", "", "x\r\n:\r\n")
	f.Fuzz(func(t *testing.T, name, value, rest string) {
		keyspaceExpires(rest)
		infoField(rest, name)
		if name == "" || strings.ContainsAny(name+value, "\r\n:") || strings.TrimSpace(value) != value ||
			strings.TrimSpace(name) != name {
			return
		}
		if strings.Contains(rest, name+":") {
			return // an earlier line of rest may carry the name
		}
		if got := infoField(rest+"\r\n"+name+":"+value+"\r\n", name); got != value {
			t.Errorf("infoField(%q) = %q, want %q", name, got, value)
		}
	})
}
