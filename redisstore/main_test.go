package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// Clients shared by the tests of the package: one per shared server.
var (
	clientsMu sync.Mutex
	clients   = map[string]rueidis.Client{}
	prefixes  atomic.Int64
)

// env is a shared server (standalone or cluster) and a client for it,
// and the layout of the stores newStore makes on it.
type env struct {
	name   string
	client rueidis.Client
	addrs  []string
	layout redisstore.Layout
}

func sharedClient(t testing.TB, addrs []string) rueidis.Client {
	t.Helper()
	clientsMu.Lock()
	defer clientsMu.Unlock()
	k := fmt.Sprint(addrs)
	if c, ok := clients[k]; ok {
		return c
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	clients[k] = c
	return c
}

func standalone(t testing.TB) env {
	s := redistest.Shared(t)
	return env{"standalone", sharedClient(t, []string{s.Addr}), []string{s.Addr}, redisstore.LayoutString}
}

func cluster(t testing.TB) env {
	c := redistest.SharedCluster(t)
	return env{"cluster", sharedClient(t, c.Addrs()), c.Addrs(), redisstore.LayoutString}
}

// both runs f on the standalone server and on the cluster.
func both(t *testing.T, f func(t *testing.T, e env)) {
	for _, mk := range []func(testing.TB) env{standalone, cluster} {
		e := mk(t)
		t.Run(e.name, func(t *testing.T) { f(t, e) })
	}
}

// layouts is both with the layout as a dimension: f runs on each server in
// the string layout and the packed one (packed.go).
func layouts(t *testing.T, f func(t *testing.T, e env)) {
	both(t, func(t *testing.T, e env) {
		for _, l := range []redisstore.Layout{redisstore.LayoutString, redisstore.LayoutPacked} {
			e.layout = l
			t.Run(l.String(), func(t *testing.T) { f(t, e) })
		}
	})
}

// packedSkips reports whether a test of algorithm a on e may skip it: the
// packed layout keeps a's states as the string layout does.
func packedSkips(e env, a ratelimit.Algorithm) bool {
	return e.layout == redisstore.LayoutPacked && a == ratelimit.SlidingWindowLog
}

// prefix returns a key prefix of its own for each store.
func prefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// newStore returns a store on e's shared client, closed at the end of t.
func newStore(t testing.TB, e env, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = prefix()
	}
	if opts.Layout == redisstore.LayoutString {
		opts.Layout = e.layout
	}
	if opts.Timeout == 0 {
		// Tests that are not about timeouts must not fail on a slow CI
		// machine.
		opts.Timeout = 10 * time.Second
	}
	s, err := redisstore.New(context.Background(), e.client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
