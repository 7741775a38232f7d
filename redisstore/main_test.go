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
	"github.com/sluicehq/sluice/redisstore"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// Clients shared by the tests of the package: one per shared server.
var (
	clientsMu sync.Mutex
	clients   = map[string]rueidis.Client{}
	prefixes  atomic.Int64
)

// env is a shared server (standalone or cluster) and a client for it.
type env struct {
	name   string
	client rueidis.Client
	addrs  []string
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
	return env{"standalone", sharedClient(t, []string{s.Addr}), []string{s.Addr}}
}

func cluster(t testing.TB) env {
	c := redistest.SharedCluster(t)
	return env{"cluster", sharedClient(t, c.Addrs()), c.Addrs()}
}

// both runs f on the standalone server and on the cluster.
func both(t *testing.T, f func(t *testing.T, e env)) {
	for _, mk := range []func(testing.TB) env{standalone, cluster} {
		e := mk(t)
		t.Run(e.name, func(t *testing.T) { f(t, e) })
	}
}

// prefix returns a key prefix of its own for each store.
func prefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// newStore returns a store on e's shared client, closed at the end of t.
func newStore(t testing.TB, e env, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = prefix()
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
