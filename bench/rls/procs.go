package rls

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// EnvoyModule and EnvoyVersion pin the envoyproxy/ratelimit build: the
// module's newest commit on the Go module proxy when this benchmark was
// written.
const (
	EnvoyModule  = "github.com/envoyproxy/ratelimit"
	EnvoyVersion = "v1.4.1-0.20260122083618-3fb702589d36"
)

// BuildEnvoy builds envoyproxy/ratelimit's service binary from its Go
// module (go install EnvoyModule/src/service_cmd@EnvoyVersion) into dir,
// unless it is there already, and returns its path.
func BuildEnvoy(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "service_cmd")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	cmd := exec.CommandContext(ctx, "go", "install", EnvoyModule+"/src/service_cmd@"+EnvoyVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build envoyproxy/ratelimit: %v\n%s", err, out)
	}
	return bin, nil
}

// BuildSluice builds cmd/sluice from the sluice module at root into dir and
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

// Proc is a server process.
type Proc struct {
	Name string
	Addr string // gRPC address
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan struct{}
	err  error
}

// Log returns the process's output so far.
func (p *Proc) Log() string { return p.log.String() }

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Stop ends the process (SIGTERM, then SIGKILL after 10 s).
func (p *Proc) Stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreePort returns a loopback port nobody listens on now.
func FreePort() (int, error) {
	ps, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// FreePorts returns n distinct free loopback ports: it holds every
// listener open until all n are chosen, since a port closed a moment ago
// may be handed out again. envoyproxy/ratelimit listens with SO_REUSEPORT,
// so two of its listeners given one port would share it, and clients
// would reach its HTTP listener when they dial its gRPC one.
func FreePorts(n int) ([]int, error) {
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

func start(ctx context.Context, name, addr string, cmd *exec.Cmd) (*Proc, error) {
	return Launch(ctx, name, addr, cmd, func(ctx context.Context, p *Proc) error { return waitReady(ctx, p) })
}

// Launch starts cmd (its output kept for Log, killed when this process
// dies) and waits until ready says it answers, or it exits.
func Launch(ctx context.Context, name, addr string, cmd *exec.Cmd, ready func(context.Context, *Proc) error) (*Proc, error) {
	p := &Proc{Name: name, Addr: addr, cmd: cmd, log: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	if err := ready(ctx, p); err != nil {
		p.Stop()
		return nil, fmt.Errorf("%s: %w\n%s", name, err, p.Log())
	}
	return p, nil
}

// Exited returns the process's exit error once it has exited, nil
// while it runs.
func (p *Proc) Exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("exited: %v", p.err)
	default:
		return nil
	}
}

// waitReady asks p for a decision until it answers (at most 60 s).
func waitReady(ctx context.Context, p *Proc) error {
	conn, err := grpc.NewClient(p.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := pb.NewRateLimitServiceClient(conn)
	deadline := time.Now().Add(time.Minute)
	for {
		if err := p.Exited(); err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.ShouldRateLimit(cctx, &pb.RateLimitRequest{Domain: "bench", Descriptors: []*commonpb.RateLimitDescriptor{
			{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "ready", Value: "probe"}}},
		}})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within a minute: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// EnvoyOptions tunes envoyproxy/ratelimit through its environment.
type EnvoyOptions struct {
	// PipelineWindow and PipelineLimit set REDIS_PIPELINE_WINDOW and
	// REDIS_PIPELINE_LIMIT (implicit pipelining); zero keeps the defaults
	// (none).
	PipelineWindow time.Duration
	PipelineLimit  int
	// PoolSize sets REDIS_POOL_SIZE; zero keeps the default (10).
	PoolSize int
	// GOGC sets the Go garbage collector's target (the GOGC variable);
	// zero keeps Go's default (100), as envoyproxy/ratelimit ships.
	GOGC int
	// GOMAXPROCS sets the GOMAXPROCS variable; zero leaves it unset.
	GOMAXPROCS int
}

// StartEnvoy runs envoyproxy/ratelimit's binary with the YAML files of
// configDir on the redis-server at redisAddr. Its runtime layout is
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml, built in workDir.
func StartEnvoy(ctx context.Context, bin, configDir, workDir, redisAddr string, o EnvoyOptions) (*Proc, error) {
	root := filepath.Join(workDir, "runtime")
	cfg := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		return nil, err
	}
	files, _ := filepath.Glob(filepath.Join(configDir, "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(cfg, filepath.Base(f)), b, 0o644); err != nil {
			return nil, err
		}
	}
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	env := []string{
		"USE_STATSD=false", "LOG_LEVEL=warn", "LOG_FORMAT=text",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
	}
	if o.PipelineWindow > 0 {
		env = append(env, "REDIS_PIPELINE_WINDOW="+o.PipelineWindow.String(), "REDIS_PIPELINE_LIMIT="+strconv.Itoa(o.PipelineLimit))
	}
	if o.PoolSize > 0 {
		env = append(env, "REDIS_POOL_SIZE="+strconv.Itoa(o.PoolSize))
	}
	if o.GOGC > 0 {
		env = append(env, "GOGC="+strconv.Itoa(o.GOGC))
	}
	if o.GOMAXPROCS > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(o.GOMAXPROCS))
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = env
	name := "envoyproxy/ratelimit"
	if o.PipelineWindow > 0 {
		name += fmt.Sprintf(" (pipeline %v/%d)", o.PipelineWindow, o.PipelineLimit)
	}
	if o.GOGC > 0 {
		name += fmt.Sprintf(" (GOGC=%d)", o.GOGC)
	}
	if o.PoolSize > 0 {
		name += fmt.Sprintf(" (pool %d)", o.PoolSize)
	}
	return start(ctx, name, "127.0.0.1:"+strconv.Itoa(ports[1]), cmd)
}

// StartSluice runs `sluice rls` with configDir on store ("memory" or a
// Redis URL).
func StartSluice(ctx context.Context, bin, configDir, store string, extra ...string) (*Proc, error) {
	gp, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(gp)
	args := append([]string{"rls", "--config-dir", configDir, "--grpc-listen", addr, "--http-listen", "", "--store", store}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	// The name says the store, and the gRPC server when it is not the
	// default: "sluice rls (redis, grpc-go)".
	kind := "redis"
	if store == "memory" {
		kind = "memory"
	}
	for i, a := range extra {
		if a == "--grpc-server" && i+1 < len(extra) && extra[i+1] != "lean" {
			kind += ", " + extra[i+1]
		}
	}
	return start(ctx, "sluice rls ("+kind+")", addr, cmd)
}

// CPUTime returns the user+system CPU time the process pid has used, from
// /proc (Linux only).
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("bad /proc stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz, nil
}
