package rls

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Load is what Measure sends: Keys distinct values of the "load" key (a
// limit high enough that nothing is denied, so both servers do the same
// work: count and answer), Descriptors per request.
type Load struct {
	Callers     int // concurrent callers (closed loop: each waits for its answer)
	Conns       int // gRPC connections shared by the callers (Envoy: one per worker)
	Keys        int
	Descriptors int
	Duration    time.Duration
	// Client is the client the callers call through: ClientRaw (the
	// default) or ClientGRPC.
	Client string
	// Rate, when positive, is the offered load in requests per second
	// (open loop): request i is sent at start + i/Rate by the next free
	// caller, as ghz --rps does; a caller that is late sends at once.
	// Zero: closed loop, every caller sends as soon as it has its answer
	// (saturation).
	Rate float64
}

// The load generator's clients. Both send the same requests over the same
// connections; they differ in what a call costs the generator's CPU, which
// on a small machine the servers share.
const (
	// ClientRaw sends requests marshalled once ahead as pre-built HTTP/2
	// frames (RawConn): a few microseconds of CPU a call.
	ClientRaw = "raw"
	// ClientGRPC calls through grpc-go's generated client: tens of
	// microseconds a call, about what a grpc-go server spends.
	ClientGRPC = "grpc"
)

// Result is one measurement of one server.
type Result struct {
	Name      string
	Requests  int64
	Errors    int64
	Over      int64
	Elapsed   time.Duration
	P50, P99  time.Duration
	ServerCPU time.Duration // the server process's CPU time during the run
	RedisCPU  time.Duration // redis-server's
	LoadCPU   time.Duration // the load generator's (this process's)
	FirstErr  error
}

// PerSecond returns requests per second.
func (r Result) PerSecond() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

func (r Result) String() string {
	per := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(max(1, r.Requests)) }
	return fmt.Sprintf("%-44s %8.0f req/s  p50 %7v  p99 %7v  server %5.1f µs/req  redis %5.1f µs/req  load %5.1f µs/req  errors %d",
		r.Name, r.PerSecond(), r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond),
		per(r.ServerCPU), per(r.RedisCPU), per(r.LoadCPU), r.Errors)
}

// Measure runs l against the server at addr and measures every request's
// latency. cpu, when not nil, is read before and after for the server's
// and Redis's CPU time.
func Measure(ctx context.Context, name, addr string, l Load, cpu func() (server, redis time.Duration)) (Result, error) {
	// Requests are built ahead: the generator's own cost stays out of the
	// latencies and is the same for every server.
	const pool = 4096
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := make([]*pb.RateLimitRequest, pool)
	encoded := make([]Encoded, pool)
	for i := range reqs {
		r := &pb.RateLimitRequest{Domain: "bench"}
		for range max(1, l.Descriptors) {
			r.Descriptors = append(r.Descriptors, &commonpb.RateLimitDescriptor{Entries: []*commonpb.RateLimitDescriptor_Entry{
				{Key: "load", Value: "k" + strconv.Itoa(rng.IntN(max(1, l.Keys)))},
			}})
		}
		reqs[i] = r
		var err error
		if encoded[i], err = Encode(r); err != nil {
			return Result{}, err
		}
	}
	// call(conn, i) sends request i on connection conn.
	var call func(conn, i int) (pb.RateLimitResponse_Code, error)
	nconns := max(1, l.Conns)
	switch l.Client {
	case ClientGRPC:
		clients := make([]pb.RateLimitServiceClient, nconns)
		for i := range clients {
			c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return Result{}, err
			}
			defer c.Close()
			clients[i] = pb.NewRateLimitServiceClient(c)
		}
		call = func(conn, i int) (pb.RateLimitResponse_Code, error) {
			resp, err := clients[conn].ShouldRateLimit(ctx, reqs[i])
			return resp.GetOverallCode(), err
		}
	case ClientRaw, "":
		conns := make([]*RawConn, nconns)
		for i := range conns {
			c, err := DialRaw(ctx, addr)
			if err != nil {
				return Result{}, err
			}
			defer c.Close()
			conns[i] = c
		}
		call = func(conn, i int) (pb.RateLimitResponse_Code, error) { return conns[conn].Call(encoded[i]) }
	default:
		return Result{}, fmt.Errorf("rls: unknown load client %q (want %s or %s)", l.Client, ClientRaw, ClientGRPC)
	}
	// Warm up: connections, pools, scripts.
	for i := range nconns {
		if _, err := call(i, i); err != nil {
			return Result{}, fmt.Errorf("%s: warm-up: %w", name, err)
		}
	}

	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		mu       sync.Mutex
		all      []time.Duration
		errs     atomic.Int64
		over     atomic.Int64
		firstErr atomic.Value
		sent     atomic.Int64
	)
	var s0, r0 time.Duration
	if cpu != nil {
		s0, r0 = cpu()
	}
	l0, _ := CPUTime(os.Getpid())
	start := time.Now()
	for i := range max(1, l.Callers) {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			conn := i % nconns
			lat := make([]time.Duration, 0, 1<<15)
			n := i * 7919
			for !stop.Load() {
				n++
				if l.Rate > 0 {
					due := start.Add(time.Duration(float64(sent.Add(1)-1) * float64(time.Second) / l.Rate))
					if d := time.Until(due); d > 0 {
						time.Sleep(d)
					}
					if stop.Load() {
						break
					}
				}
				t0 := time.Now()
				code, err := call(conn, n%pool)
				lat = append(lat, time.Since(t0))
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				if code == pb.RateLimitResponse_OVER_LIMIT {
					over.Add(1)
				}
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}(i)
	}
	time.Sleep(l.Duration)
	stop.Store(true)
	wg.Wait()
	r := Result{Name: name, Elapsed: time.Since(start), Requests: int64(len(all)), Errors: errs.Load(), Over: over.Load()}
	if l1, err := CPUTime(os.Getpid()); err == nil {
		r.LoadCPU = l1 - l0
	}
	if cpu != nil {
		s1, r1 := cpu()
		r.ServerCPU, r.RedisCPU = s1-s0, r1-r0
	}
	if e, ok := firstErr.Load().(error); ok {
		r.FirstErr = e
	}
	slices.Sort(all)
	if len(all) > 0 {
		r.P50 = all[len(all)/2]
		r.P99 = all[len(all)*99/100]
	}
	return r, nil
}
