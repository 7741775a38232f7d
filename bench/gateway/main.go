// Command gateway measures the cost of sluice's gateway limits: the same
// gateway (builtin:echo upstream, memory store) with limits on and with
// limits off (the kill switch, disabled: true), side by side in one run.
// Rounds alternate (off, on, off, on, …) so that both see the same machine
// state; each round is a closed loop of -c keep-alive clients, each
// connecting from its own loopback address (127.0.0.2 to 127.0.0.201), so
// limits on means one token bucket per client IP, as anonymous traffic.
// The limits admit every request: the figure is the overhead of deciding
// and of the headers, not of answering 429s (which are cheaper).
//
//	cd bench && go run ./gateway -c 64 -d 5s -rounds 3
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// config is the gateway under test; %s is "true" for limits off.
const config = `
upstream: builtin:echo
disabled: %s
routes:
  - path: /
    rate_limits:
      - actions: [{identity: {}}]
rules:
  domain: bench
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}
    - key: user
      rate_limit: {name: per-user, algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}
`

func main() {
	conc := flag.Int("c", 64, "concurrent clients")
	dur := flag.Duration("d", 5*time.Second, "duration of one round")
	rounds := flag.Int("rounds", 3, "rounds per variant (they alternate)")
	flag.Parse()
	res, err := run(context.Background(), *conc, *dur, *rounds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/gateway:", err)
		os.Exit(1)
	}
	fmt.Printf("sluice gateway, builtin:echo upstream, memory store; %d clients, %d rounds of %v per variant, GOMAXPROCS=%d, %s\n\n",
		*conc, *rounds, *dur, runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Print(res.Table())
}

// Variant is the outcome of one variant over all its rounds.
type Variant struct {
	Name     string
	Requests int64
	Errors   int64
	Denied   int64
	Elapsed  time.Duration
	Lat      []time.Duration // a sample of latencies
	Headers  bool            // responses carried RateLimit headers
}

// RPS is requests per second.
func (v Variant) RPS() float64 { return float64(v.Requests) / v.Elapsed.Seconds() }

func (v Variant) pct(p float64) time.Duration {
	if len(v.Lat) == 0 {
		return 0
	}
	s := slices.Clone(v.Lat)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// Result is limits off and limits on.
type Result struct{ Off, On Variant }

// Table formats r as Markdown.
func (r Result) Table() string {
	var b strings.Builder
	b.WriteString("| variant | requests/s | p50 | p99 | errors | 429s |\n|---|---:|---:|---:|---:|---:|\n")
	for _, v := range []Variant{r.Off, r.On} {
		fmt.Fprintf(&b, "| %s | %.0f | %v | %v | %d | %d |\n", v.Name, v.RPS(), v.pct(0.5).Round(time.Microsecond), v.pct(0.99).Round(time.Microsecond), v.Errors, v.Denied)
	}
	fmt.Fprintf(&b, "\nlimits on / limits off throughput: **%.1f%%**\n", 100*r.On.RPS()/r.Off.RPS())
	return b.String()
}

func start(ctx context.Context, disabled bool) (string, func(), error) {
	cfg, err := gateway.Parse("bench.yaml", fmt.Appendf(nil, config, fmt.Sprint(disabled)))
	if err != nil {
		return "", nil, err
	}
	g, err := gateway.New(ctx, cfg, gateway.Options{})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- g.Serve(sctx, ln, nil) }()
	return "http://" + ln.Addr().String() + "/hello", func() { cancel(); <-done; g.Close() }, nil
}

func run(ctx context.Context, conc int, dur time.Duration, rounds int) (Result, error) {
	offURL, stopOff, err := start(ctx, true)
	if err != nil {
		return Result{}, err
	}
	defer stopOff()
	onURL, stopOn, err := start(ctx, false)
	if err != nil {
		return Result{}, err
	}
	defer stopOn()
	r := Result{Off: Variant{Name: "limits off"}, On: Variant{Name: "limits on (per-IP token bucket)"}}
	clients := make([]*http.Client, conc)
	for i := range clients {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, byte(i/200), byte(2+i%200))}}
		clients[i] = &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	}
	defer func() {
		for _, c := range clients {
			c.Transport.(*http.Transport).CloseIdleConnections()
		}
	}()
	// One short warm-up round each, not counted.
	load(clients, offURL, dur/5, nil)
	load(clients, onURL, dur/5, nil)
	for range rounds {
		load(clients, offURL, dur, &r.Off)
		load(clients, onURL, dur, &r.On)
	}
	return r, nil
}

// load runs a closed loop of one request at a time per client for d, and
// adds what it saw to v (when not nil).
func load(clients []*http.Client, url string, d time.Duration, v *Variant) {
	var n, errs, denied atomic.Int64
	var headers atomic.Bool
	var mu sync.Mutex
	var lat []time.Duration
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for i := 0; time.Now().Before(deadline); i++ {
				s := time.Now()
				res, err := c.Get(url)
				if err != nil {
					errs.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				switch res.StatusCode {
				case 200:
				case 429:
					denied.Add(1)
				default:
					errs.Add(1)
				}
				if res.Header.Get("RateLimit") != "" {
					headers.Store(true)
				}
				n.Add(1)
				if i%16 == 0 {
					mine = append(mine, time.Since(s))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if v != nil {
		v.Elapsed += time.Since(t0)
		v.Requests += n.Load()
		v.Errors += errs.Load()
		v.Denied += denied.Load()
		v.Lat = append(v.Lat, lat...)
		v.Headers = v.Headers || headers.Load()
	}
}
