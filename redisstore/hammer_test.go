package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// The hammer: several independent clients (separate connection pools, and
// separate processes: the test binary re-executed) spend from one key on
// Redis's clock. Together they must never admit more than the limit allows
// over the time they ran.

const hammerEnv = "SLUICE_REDISSTORE_HAMMER" // addrs|prefix|key|algorithm|start|end (Unix ns)

// hammerOne waits until start, then applies cost-1 requests on key until
// end, and returns how many were admitted and when its last call returned.
func hammerOne(s *redisstore.Store, key string, alg ratelimit.Algorithm, lim ratelimit.Limit, start, end time.Time) (int64, time.Time, error) {
	var admitted atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	time.Sleep(time.Until(start))
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				dec, err := s.Apply(context.Background(), ratelimit.Request{Key: key, Limit: lim, Algorithm: alg, N: 1})
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				if dec.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	last := time.Now()
	if err, ok := firstErr.Load().(error); ok {
		return admitted.Load(), last, err
	}
	return admitted.Load(), last, nil
}

var hammerLimit = ratelimit.Limit{Rate: 20, Period: 100 * time.Millisecond, Burst: 10}

// TestHammerChild is the child process's side; it does nothing unless
// started by TestHammer.
func TestHammerChild(t *testing.T) {
	spec := os.Getenv(hammerEnv)
	if spec == "" {
		t.Skip("run by TestHammer in a child process")
	}
	f := strings.Split(spec, "|")
	alg, err := ratelimit.ParseAlgorithm(f[3])
	if err != nil {
		t.Fatal(err)
	}
	start, _ := strconv.ParseInt(f[4], 10, 64)
	end, _ := strconv.ParseInt(f[5], 10, 64)
	url := "redis://" + f[0]
	if strings.Contains(f[0], ",") {
		url = "redis-cluster://" + f[0]
	}
	s, err := redisstore.Open(context.Background(), url, redisstore.Options{Prefix: f[1], Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, last, err := hammerOne(s, f[2], alg, hammerLimit, time.Unix(0, start), time.Unix(0, end))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("ADMITTED %d %d\n", n, last.UnixNano())
}

func TestHammer(t *testing.T) {
	if os.Getenv(hammerEnv) != "" {
		t.Skip("child process")
	}
	const (
		procs   = 3 // child processes
		inProc  = 2 // stores with their own clients in this process
		running = 700 * time.Millisecond
	)
	both(t, func(t *testing.T, e env) {
		for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindowCounter, ratelimit.SlidingWindowLog} {
			t.Run(alg.String(), func(t *testing.T) {
				t.Parallel()
				pfx := prefix()
				key := "hot"
				var total atomic.Int64
				var mu sync.Mutex
				var wg sync.WaitGroup
				// Everyone starts at the same moment, once the children are up,
				// and stops at the same moment: the bound holds over
				// [start, the last call's return]. The children are test
				// binaries built with -race that connect to Redis first: on a
				// loaded machine they took more than 1.5 s to be ready.
				start := time.Now().Add(4 * time.Second)
				stop := start.Add(running)
				last := stop
				ended := func(at time.Time) {
					mu.Lock()
					if at.After(last) {
						last = at
					}
					mu.Unlock()
				}
				for range procs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						cmd := exec.Command(os.Args[0], "-test.run=^TestHammerChild$", "-test.count=1")
						cmd.Env = append(os.Environ(), hammerEnv+"="+strings.Join([]string{
							strings.Join(e.addrs, ","), pfx, key, alg.String(),
							strconv.FormatInt(start.UnixNano(), 10), strconv.FormatInt(stop.UnixNano(), 10),
						}, "|"))
						out, err := cmd.CombinedOutput()
						if err != nil {
							t.Errorf("child: %v\n%s", err, out)
							return
						}
						for _, line := range strings.Split(string(out), "\n") {
							if rest, ok := strings.CutPrefix(line, "ADMITTED "); ok {
								var n, at int64
								fmt.Sscan(rest, &n, &at)
								total.Add(n)
								ended(time.Unix(0, at))
								return
							}
						}
						t.Errorf("child printed no count:\n%s", out)
					}()
				}
				for range inProc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						s := newStore(t, env{client: ownClient(t, e.addrs...)}, redisstore.Options{Prefix: pfx, Timeout: 5 * time.Second})
						n, at, err := hammerOne(s, key, alg, hammerLimit, start, stop)
						if err != nil {
							t.Error(err)
						}
						total.Add(n)
						ended(at)
					}()
				}
				wg.Wait()
				end := last
				// Redis's TIME has microseconds: a decision taken just after
				// start may read up to 1µs before it.
				start = start.Add(-time.Microsecond)
				// Every decision was taken on Redis's clock between start and
				// end (same machine, same clock).
				lim := hammerLimit.Normalize()
				var bound int64
				switch alg {
				case ratelimit.GCRA:
					bound = lim.Burst + int64(end.Sub(start)/lim.Interval())
				default:
					// At most Rate per aligned window of Period: the fixed
					// window's count, the sliding counter's current count (its
					// estimate adds the previous window's share), and the
					// log's, which holds for any window.
					p := int64(lim.Period)
					windows := end.UnixNano()/p - start.UnixNano()/p + 1
					bound = lim.Rate * windows
				}
				got := total.Load()
				t.Logf("%d clients admitted %d in %v; bound %d", procs+inProc, got, end.Sub(start).Round(time.Millisecond), bound)
				if got > bound {
					t.Errorf("admitted %d, more than the limit allows (%d)", got, bound)
				}
				if got < lim.Rate {
					t.Errorf("admitted %d, fewer than one window's worth (%d): the clients did not run", got, lim.Rate)
				}
			})
		}
	})
}
