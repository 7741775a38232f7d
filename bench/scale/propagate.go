package scale

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
)

// Modes of Propagation: how the fleet gets its rules.
const (
	ModeServe = "serve"   // sluice serve, rules_files, polled every --watch-interval
	ModeRLS   = "rls"     // sluice rls --config-dir, polled every --poll
	ModeXDS   = "rls-xds" // sluice rls --config-type xds, pushed by a management server
)

// Modes lists the modes in the order Propagation's command runs them.
var Modes = []string{ModeServe, ModeRLS, ModeXDS}

// PropagationOptions configures Propagation.
type PropagationOptions struct {
	// Binary is the sluice binary to run (see BuildSluice).
	Binary string
	Mode   string
	// Instances is the number of processes; 0 means 3.
	Instances int
	// Changes is the number of limit changes timed; 0 means 10.
	Changes int
	// Interval is --watch-interval (serve) or --poll (rls); 0 keeps the
	// binary's default (1 s). It does not apply to xDS, which pushes.
	Interval time.Duration
	// Probe is how often each instance is asked for its limit while a
	// change is being timed; 0 means 5 ms.
	Probe time.Duration
	// Settle is the pause between changes; 0 means 300 ms plus a random
	// part of Interval, so changes land at every phase of the pollers.
	Settle time.Duration
	// Dir is a scratch directory for the rules and configs; "" makes one.
	Dir string
	// Log, when set, receives the processes' output when something fails.
	Log io.Writer
}

// PropagationResult is what Propagation measured: for each change, each
// instance's lag, from the moment the rules were changed (the file renamed
// into place, or the snapshot set) to the first answer that carried the
// new limit.
type PropagationResult struct {
	Mode      string
	Instances int
	Lags      [][]time.Duration // [change][instance]
}

// All returns every lag, sorted.
func (r PropagationResult) All() []time.Duration {
	var all []time.Duration
	for _, c := range r.Lags {
		all = append(all, c...)
	}
	slices.Sort(all)
	return all
}

// Fleet returns, per change, the lag of the last instance to enforce it
// (the fleet has the new limit when all have), sorted.
func (r PropagationResult) Fleet() []time.Duration {
	var out []time.Duration
	for _, c := range r.Lags {
		out = append(out, slices.Max(c))
	}
	slices.Sort(out)
	return out
}

// Quantile returns the q-quantile of sorted ds (nearest rank).
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[max(0, min(len(ds)-1, i))]
}

// seedRate is the limit before and after each change: the seed's 1,000 a
// minute, then 2,000, then back.
func seedRate(change int) uint32 {
	if change%2 == 0 {
		return 2000
	}
	return 1000
}

// Propagation starts o.Instances sluice processes that share one rules
// source, changes the seed's limit o.Changes times, and times how long
// each instance takes to answer by the new limit: `sluice serve` reads the
// limit from a rules file (its RateLimit-Policy header names the new
// quota), `sluice rls` from a config directory or an xDS management server
// (its /json answer names the new requests_per_unit). Every instance runs
// the memory store: where the counters live does not change how rules
// reach a process.
func Propagation(ctx context.Context, o PropagationOptions) (PropagationResult, error) {
	if o.Instances <= 0 {
		o.Instances = 3
	}
	if o.Changes <= 0 {
		o.Changes = 10
	}
	if o.Probe <= 0 {
		o.Probe = 5 * time.Millisecond
	}
	res := PropagationResult{Mode: o.Mode, Instances: o.Instances}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "sluice-propagation-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(d)
		o.Dir = d
	}
	f, err := newFleet(ctx, o)
	if err != nil {
		return res, err
	}
	defer f.stop()
	interval := o.Interval
	if interval <= 0 {
		interval = time.Second
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()

	// Every instance must answer by the first limit before the clock runs.
	for i := range f.procs {
		if err := waitFor(ctx, 30*time.Second, o.Probe, func() (bool, error) {
			v, err := f.limit(ctx, client, i)
			return v == f.want(1000), err
		}); err != nil {
			return res, f.fail(o, fmt.Errorf("instance %d never answered by the first limit: %w", i, err))
		}
	}
	for c := range o.Changes {
		// Land each change at a different phase of the pollers.
		settle := o.Settle
		if settle <= 0 {
			settle = 300*time.Millisecond + time.Duration(c)*interval/time.Duration(o.Changes)
		}
		select {
		case <-time.After(settle):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		rate := seedRate(c)
		start, err := f.change(ctx, rate)
		if err != nil {
			return res, f.fail(o, err)
		}
		lags := make([]time.Duration, len(f.procs))
		errs := make([]error, len(f.procs))
		var wg sync.WaitGroup
		for i := range f.procs {
			wg.Go(func() {
				errs[i] = waitFor(ctx, time.Minute, o.Probe, func() (bool, error) {
					v, err := f.limit(ctx, client, i)
					if err == nil && v == f.want(rate) {
						lags[i] = time.Since(start)
						return true, nil
					}
					return false, err
				})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return res, f.fail(o, fmt.Errorf("change %d to %d a minute: %w", c+1, rate, err))
		}
		res.Lags = append(res.Lags, lags)
	}
	return res, nil
}

// waitFor calls check every probe until it says done, for at most limit.
// Errors from check are retried (a process may be reloading) and returned
// if the time runs out.
func waitFor(ctx context.Context, limit, probe time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	var last error
	for {
		done, err := check()
		if done {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			if last == nil {
				last = errors.New("the old value still")
			}
			return fmt.Errorf("not within %v: %w", limit, last)
		}
		select {
		case <-time.After(probe):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fleet is the processes of one mode and how to change and read their
// limit.
type fleet struct {
	mode    string
	dir     string
	procs   []*proc
	urls    []string // what to ask each process
	xds     cachev3.SnapshotCache
	xdsStop func()
	version int
}

type proc struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freePorts returns n distinct free loopback ports, holding every listener
// until all are chosen.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

const serveRules = `domain: scale
descriptors:
  - key: generic_key
    value: seed
    rate_limit: {name: seed, algorithm: token_bucket, unit: minute, requests_per_unit: %d, burst: 200}
`

const serveConfig = `listen: 127.0.0.1:%d
admin_listen: 127.0.0.1:%d
upstream: builtin:echo
store: memory
headers: ietf
rules_files: [rules.yaml]
routes:
  - path: /
    rate_limits:
      - actions: [{generic_key: {descriptor_value: seed}}]
`

func newFleet(ctx context.Context, o PropagationOptions) (*fleet, error) {
	f := &fleet{mode: o.Mode, dir: o.Dir}
	ports, err := freePorts(2 * o.Instances)
	if err != nil {
		return nil, err
	}
	var interval []string
	switch o.Mode {
	case ModeServe:
		if o.Interval > 0 {
			interval = []string{"--watch-interval", o.Interval.String()}
		}
		if err := writeAtomic(filepath.Join(o.Dir, "rules.yaml"), fmt.Sprintf(serveRules, 1000)); err != nil {
			return nil, err
		}
	case ModeRLS:
		if o.Interval > 0 {
			interval = []string{"--poll", o.Interval.String()}
		}
		if err := os.MkdirAll(filepath.Join(o.Dir, "config"), 0o755); err != nil {
			return nil, err
		}
		if err := writeAtomic(filepath.Join(o.Dir, "config", "scale.yaml"), fmt.Sprintf(serveRules, 1000)); err != nil {
			return nil, err
		}
	case ModeXDS:
		f.xds = cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
		g := grpc.NewServer()
		discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(context.Background(), f.xds, nil))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		go g.Serve(ln)
		f.xdsStop = g.Stop
		interval = []string{"--xds-server", ln.Addr().String()}
		if err := f.push(ctx, 1000, o.Instances); err != nil {
			g.Stop()
			return nil, err
		}
	default:
		return nil, fmt.Errorf("scale: unknown mode %q (want %s)", o.Mode, strings.Join(Modes, ", "))
	}
	for i := range o.Instances {
		a, b := ports[2*i], ports[2*i+1]
		var args []string
		switch o.Mode {
		case ModeServe:
			cfg := filepath.Join(o.Dir, fmt.Sprintf("gateway-%d.yaml", i))
			if err := writeAtomic(cfg, fmt.Sprintf(serveConfig, a, b)); err != nil {
				f.stop()
				return nil, err
			}
			args = append([]string{"serve", "--config", cfg}, interval...)
			f.urls = append(f.urls, fmt.Sprintf("http://127.0.0.1:%d/", a))
		case ModeRLS:
			args = append([]string{"rls", "--config-dir", filepath.Join(o.Dir, "config"),
				"--grpc-listen", fmt.Sprintf("127.0.0.1:%d", a), "--http-listen", fmt.Sprintf("127.0.0.1:%d", b)}, interval...)
			f.urls = append(f.urls, fmt.Sprintf("http://127.0.0.1:%d/json", b))
		case ModeXDS:
			args = append([]string{"rls", "--config-type", "xds", "--xds-node-id", xdsNode(i),
				"--grpc-listen", fmt.Sprintf("127.0.0.1:%d", a), "--http-listen", fmt.Sprintf("127.0.0.1:%d", b)}, interval...)
			f.urls = append(f.urls, fmt.Sprintf("http://127.0.0.1:%d/json", b))
		}
		cmd := exec.Command(o.Binary, args...)
		p := &proc{cmd: cmd, out: &lockedBuffer{}, done: make(chan struct{})}
		cmd.Stdout, cmd.Stderr = p.out, p.out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			f.stop()
			return nil, err
		}
		go func() { cmd.Wait(); close(p.done) }()
		f.procs = append(f.procs, p)
	}
	return f, nil
}

// xdsNode is instance i's node ID: one each, so a push is a snapshot per
// node, as a management server serves a fleet.
func xdsNode(i int) string { return "sluice-" + strconv.Itoa(i) }

// push sets every node's snapshot to the seed's rule at rate a minute.
func (f *fleet) push(ctx context.Context, rate uint32, nodes int) error {
	f.version++
	res := []types.Resource{&rlsconf.RateLimitConfig{Name: "scale", Domain: "scale",
		Descriptors: []*rlsconf.RateLimitDescriptor{{Key: "generic_key", Value: "seed",
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_MINUTE, RequestsPerUnit: rate}}}}}
	snap, err := cachev3.NewSnapshot(strconv.Itoa(f.version), map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: res})
	if err != nil {
		return err
	}
	for i := range nodes {
		if err := f.xds.SetSnapshot(ctx, xdsNode(i), snap); err != nil {
			return err
		}
	}
	return nil
}

// change sets the limit to rate a minute and returns when it did.
func (f *fleet) change(ctx context.Context, rate uint32) (time.Time, error) {
	switch f.mode {
	case ModeServe:
		start := time.Now()
		return start, writeAtomic(filepath.Join(f.dir, "rules.yaml"), fmt.Sprintf(serveRules, rate))
	case ModeRLS:
		start := time.Now()
		return start, writeAtomic(filepath.Join(f.dir, "config", "scale.yaml"), fmt.Sprintf(serveRules, rate))
	}
	start := time.Now()
	return start, f.push(ctx, rate, len(f.procs))
}

// want is what limit reads for a limit of rate a minute: the gateway's
// RateLimit-Policy value (a bucket of 200 refilled at rate a minute: q=200
// and the window in which it refills), the RLS's requests_per_unit.
func (f *fleet) want(rate uint32) string {
	if f.mode == ModeServe {
		return fmt.Sprintf(`"seed";q=200;w=%d`, 200*60/int(rate))
	}
	return strconv.Itoa(int(rate))
}

// limit asks instance i for the limit it applies now.
func (f *fleet) limit(ctx context.Context, c *http.Client, i int) (string, error) {
	var req *http.Request
	var err error
	if f.mode == ModeServe {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, f.urls[i], nil)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, f.urls[i],
			strings.NewReader(`{"domain":"scale","descriptors":[{"entries":[{"key":"generic_key","value":"seed"}]}]}`))
	}
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return "", err
	}
	if f.mode == ModeServe {
		return resp.Header.Get("RateLimit-Policy"), nil
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", f.urls[i], resp.Status, body)
	}
	var r struct {
		Statuses []struct {
			CurrentLimit struct {
				RequestsPerUnit int `json:"requestsPerUnit"`
			} `json:"currentLimit"`
		} `json:"statuses"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return "", fmt.Errorf("%s: %w: %s", f.urls[i], err, body)
	}
	if len(r.Statuses) != 1 {
		return "", fmt.Errorf("%s: %d statuses: %s", f.urls[i], len(r.Statuses), body)
	}
	return strconv.Itoa(r.Statuses[0].CurrentLimit.RequestsPerUnit), nil
}

// fail adds the processes' output to err when asked to.
func (f *fleet) fail(o PropagationOptions, err error) error {
	if o.Log != nil {
		for i, p := range f.procs {
			fmt.Fprintf(o.Log, "--- instance %d (%s):\n%s\n", i, strings.Join(p.cmd.Args, " "), Indent(p.out.String(), "  "))
		}
	}
	return err
}

// stop ends every process (SIGTERM, then SIGKILL after 10 s) and the
// management server.
func (f *fleet) stop() {
	for _, p := range f.procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range f.procs {
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	if f.xdsStop != nil {
		f.xdsStop()
	}
}

// writeAtomic writes data to a temporary file beside name and renames it
// over name, as docs/gateway.md asks of config changes.
func writeAtomic(name, data string) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// BuildSluice builds cmd/sluice of the sluice module at root into dir and
// returns its path.
func BuildSluice(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "sluice")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build sluice: %v\n%s", err, out)
	}
	return bin, nil
}
