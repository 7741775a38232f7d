package dist

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice/bench/rls"
)

// GubernatorPeers and SluiceInstances are how many instances of each
// contender run.
const (
	GubernatorPeers = 3
	SluiceInstances = 3
)

// Set is one contender: its instances, and the processes whose CPU time
// it is charged (its servers, and redis-server for sluice).
type Set struct {
	Name   string
	Procs  []*rls.Proc
	PIDs   []int
	Target Target
}

// Addrs returns the instances' gRPC addresses.
func (s *Set) Addrs() []string {
	a := make([]string, len(s.Procs))
	for i, p := range s.Procs {
		a[i] = p.Addr
	}
	return a
}

// add adds the instance p to s, or, when err is not nil, stops s's
// instances and returns err.
func (s *Set) add(p *rls.Proc, err error) error {
	if err != nil {
		s.Stop()
		return err
	}
	s.Procs = append(s.Procs, p)
	s.PIDs = append(s.PIDs, p.PID())
	return nil
}

// Stop ends every instance.
func (s *Set) Stop() {
	for _, p := range s.Procs {
		p.Stop()
	}
}

// CPU returns the CPU time the set's processes have used so far.
func (s *Set) CPU() time.Duration {
	var t time.Duration
	for _, pid := range s.PIDs {
		d, _ := rls.CPUTime(pid)
		t += d
	}
	return t
}

// StartGubernators runs n gubernator peers on loopback, each with its own
// loopback address (gRPC, HTTP and memberlist ports) and host name, every one told of the
// first, and waits
// until each one's health check counts all n peers. behavior is sent in
// every request (gubernator's Behavior: 0 is its default, BATCHING; 2 is
// GLOBAL).
func StartGubernators(ctx context.Context, bin string, n int, behavior int64) (*Set, error) {
	ports, err := rls.FreePorts(3 * n)
	if err != nil {
		return nil, err
	}
	// gubernator keeps memberlist's peers by IP address, so each peer has
	// a loopback address of its own: 127.0.0.2, 127.0.0.3, …
	addr := func(i int) string { return fmt.Sprintf("127.0.0.%d:%d", 2+i/3, ports[i]) }
	s := &Set{}
	for i := range n {
		g, h, m := addr(3*i), addr(3*i+1), addr(3*i+2)
		// memberlist names a node by its host name, which three peers on
		// one machine share: each runs in a UTS namespace of its own
		// (unshare -u, root only) with a host name of its own; exec keeps
		// the process id, so CPU time is read from gubernator itself.
		cmd := exec.CommandContext(ctx, "unshare", "-u", "sh", "-c",
			fmt.Sprintf(`hostname gubernator-%d-%d && exec "$0"`, os.Getpid(), i), bin)
		cmd.Env = []string{
			"GUBER_GRPC_ADDRESS=" + g, "GUBER_HTTP_ADDRESS=" + h, "GUBER_ADVERTISE_ADDRESS=" + g,
			"GUBER_PEER_DISCOVERY_TYPE=member-list",
			"GUBER_MEMBERLIST_ADDRESS=" + m, "GUBER_MEMBERLIST_BIND_ADDRESS=" + m,
			"GUBER_MEMBERLIST_KNOWN_NODES=" + addr(2),
			"GUBER_LOG_LEVEL=warn", "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true",
			"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		}
		if err := s.add(rls.Launch(ctx, fmt.Sprintf("gubernator %d", i), g, cmd, func(ctx context.Context, p *rls.Proc) error {
			return waitPeers(ctx, p, 1)
		})); err != nil {
			return nil, err
		}
	}
	for _, p := range s.Procs {
		if err := waitPeers(ctx, p, n); err != nil {
			s.Stop()
			return nil, fmt.Errorf("%s: %w\n%s", p.Name, err, p.Log())
		}
	}
	return s.WithBehavior(behavior), nil
}

// waitPeers calls V1.HealthCheck on p until it reports at least n peers
// (at most 60 s).
func waitPeers(ctx context.Context, p *rls.Proc, n int) error {
	conn, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		if err := p.Exited(); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		var resp []byte
		err := conn.Invoke(cctx, "/pb.gubernator.V1/HealthCheck", []byte{}, &resp, grpc.ForceCodec(rawCodec{}))
		cancel()
		if err == nil {
			peers, _ := field(resp, 3) // HealthCheckResp.peer_count
			if int(peers) >= n {
				return nil
			}
			err = fmt.Errorf("health check: %d peers of %d", peers, n)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready within a minute: %v", last)
}

// SluiceConfig writes the configuration the sluice instances load into
// dir: domain "dist", key "load" with a limit nothing reaches (10⁹ a
// second) and key "exact" with limit a second, both fixed windows.
func SluiceConfig(dir string, limit int) error {
	y := strings.Join([]string{
		"domain: dist",
		"descriptors:",
		"  - key: load",
		"    rate_limit: {unit: second, requests_per_unit: 1000000000}",
		"  - key: exact",
		"    rate_limit: {unit: second, requests_per_unit: " + strconv.Itoa(limit) + "}",
		"",
	}, "\n")
	return os.WriteFile(filepath.Join(dir, "dist.yaml"), []byte(y), 0o644)
}

// StartSluices runs n `sluice rls` instances with configDir on the
// redis-server at redisAddr (process redisPID, charged to the set).
func StartSluices(ctx context.Context, bin, configDir, redisAddr string, redisPID, n int) (*Set, error) {
	s := &Set{Name: fmt.Sprintf("sluice rls ×%d + redis", n), Target: Sluice(), PIDs: []int{redisPID}}
	for range n {
		if err := s.add(rls.StartSluice(ctx, bin, configDir, "redis://"+redisAddr, "--store-timeout", "10s")); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// WithBehavior returns s sending behavior in its requests: the same
// peers, another contender.
func (s *Set) WithBehavior(behavior int64) *Set {
	c := *s
	c.Target = Gubernator(behavior)
	c.Name = fmt.Sprintf("gubernator ×%d", len(s.Procs))
	if behavior&BehaviorGlobal != 0 {
		c.Name = fmt.Sprintf("gubernator GLOBAL ×%d", len(s.Procs))
	}
	return &c
}
