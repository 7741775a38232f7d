package redisinflight_test

import (
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(holderEnv); addr != "" {
		holder(addr) // the child of TestCrashedHolder: never returns
	}
	redistest.Main(m)
}

var (
	clientsMu sync.Mutex
	clients   = map[string]rueidis.Client{}
	prefixes  atomic.Int64
)

// env is a shared server (standalone or cluster) and a client for it.
type env struct {
	name   string
	client rueidis.Client
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
	return env{"standalone", sharedClient(t, []string{s.Addr})}
}

func cluster(t testing.TB) env {
	c := redistest.SharedCluster(t)
	return env{"cluster", sharedClient(t, c.Addrs())}
}

// both runs f on the standalone server and on the 3-master cluster.
func both(t *testing.T, f func(t *testing.T, e env)) {
	for _, mk := range []func(testing.TB) env{standalone, cluster} {
		e := mk(t)
		t.Run(e.name, func(t *testing.T) { f(t, e) })
	}
}

func prefix() string { return fmt.Sprintf("t%d:", prefixes.Add(1)) }

// newStore returns a store on e's shared client with a prefix of its own.
func newStore(t testing.TB, e env, opts redisinflight.Options) *redisinflight.Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = prefix()
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second // not about timeouts: a slow machine must not fail them
	}
	s, err := redisinflight.New(e.client, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// netDialer dials quickly, so a killed server is an error at once.
func netDialer() net.Dialer { return net.Dialer{Timeout: time.Second} }
