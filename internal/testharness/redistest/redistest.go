package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// StartTimeout bounds how long a server (or a cluster) may take to answer
// after it was started. It is generous: CI machines are small and noisy.
const StartTimeout = 20 * time.Second

// find returns the path of the program name: in PATH, or in the usual
// directories.
func find(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/bin", "/usr/local/bin", "/usr/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("redistest: %s not found in PATH", name)
}

// ValkeyBinary returns the path of valkey-server, or an error when it is
// missing.
func ValkeyBinary() (string, error) { return find("valkey-server") }

// RequireValkey skips tb when valkey-server is missing, or fails it when
// the environment variable CI is "true" (scripts/test fetches it).
func RequireValkey(tb testing.TB) {
	tb.Helper()
	_, err := ValkeyBinary()
	require(tb, err)
}

// StartValkey starts a standalone valkey-server for tb, as Start does a
// redis-server, and stops it when tb ends.
func StartValkey(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	bin, err := ValkeyBinary()
	require(tb, err)
	return start(tb, bin, extra)
}

// Binaries returns the paths of redis-server and redis-cli, or an error
// naming the one that is missing.
func Binaries() (server, cli string, err error) {
	if server, err = find("redis-server"); err != nil {
		return "", "", err
	}
	if cli, err = find("redis-cli"); err != nil {
		return "", "", err
	}
	return server, cli, nil
}

// Require skips tb when redis-server or redis-cli is missing, or fails it
// when the environment variable CI is "true".
func Require(tb testing.TB) {
	tb.Helper()
	_, _, err := Binaries()
	require(tb, err)
}

// require skips tb for err, a missing program, or fails it under CI=true:
// CI must not pass by skipping.
func require(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%v (required under CI=true; scripts/test installs it)", err)
	}
	tb.Skipf("%v; skipping", err)
}

// Server is one redis-server process listening on 127.0.0.1.
type Server struct {
	Addr string // host:port, always 127.0.0.1
	Port int

	bin     string // redis-server, or valkey-server
	dir     string
	args    []string
	cleanup bool // remove dir on Close

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been reaped
	closed bool
}

// Start starts a standalone server for tb and stops it when tb ends. Extra
// arguments go to redis-server after sluice's own (for example
// "--tls-port", "0", …); the server must still answer PING on Addr.
func Start(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	bin, _, err := Binaries()
	require(tb, err)
	return start(tb, bin, extra)
}

// start starts the server program bin for tb and stops it when tb ends.
func start(tb testing.TB, bin string, extra []string) *Server {
	tb.Helper()
	s, err := startServerBin(bin, tb.TempDir(), false, extra...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// StartServer starts a standalone server that the caller must Close. Use it
// outside tests (benchmarks' main functions, TestMain); tests use Start or
// Shared.
func StartServer() (*Server, error) {
	if _, _, err := Binaries(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s, err := startServer(dir, false)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.cleanup = true
	return s, nil
}

func startServer(dir string, cluster bool, extra ...string) (*Server, error) {
	bin, _, err := Binaries()
	if err != nil {
		return nil, err
	}
	return startServerBin(bin, dir, cluster, extra...)
}

// startServerBin starts the server program bin (redis-server or
// valkey-server).
func startServerBin(bin, dir string, cluster bool, extra ...string) (*Server, error) {
	var last error
	for attempt := 0; attempt < 8; attempt++ {
		port, err := freePort(cluster)
		if err != nil {
			return nil, err
		}
		s := &Server{
			Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Port: port,
			bin:  bin,
			dir:  filepath.Join(dir, strconv.Itoa(port)),
		}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, fmt.Errorf("redistest: %w", err)
		}
		s.args = []string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--save", "",
			"--appendonly", "no",
			"--daemonize", "no",
			"--dir", s.dir,
			"--logfile", "redis.log",
			"--loglevel", "warning",
		}
		if cluster {
			s.args = append(s.args,
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "2000",
				"--cluster-require-full-coverage", "no",
			)
		}
		s.args = append(s.args, extra...)
		if last = s.launch(); last == nil {
			return s, nil
		}
		// Most likely someone took the port between freePort and the bind:
		// try another.
	}
	return nil, last
}

// FreePort returns a loopback port that was free a moment ago, for a
// second listener of a server (a TLS port).
func FreePort() (int, error) { return freePort(false) }

// freePort returns a loopback port that was free a moment ago. A cluster
// node also needs port+10000 (its bus port).
func freePort(cluster bool) (int, error) {
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("redistest: no free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !cluster {
			l.Close()
			return port, nil
		}
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		l.Close()
		if err != nil {
			continue
		}
		bus.Close()
		return port, nil
	}
	return 0, errors.New("redistest: no free port pair for a cluster node")
}

// launch starts the process and waits until it answers PING.
func (s *Server) launch() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redistest: start %s: %w", filepath.Base(s.bin), err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	deadline := time.Now().Add(StartTimeout)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redistest: redis-server on port %d exited at start: %s", s.Port, s.logTail())
		default:
		}
		if v, err := s.Do("PING"); err == nil && v == "PONG" {
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("redistest: redis-server on port %d did not answer PING in %v: %s", s.Port, StartTimeout, s.logTail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	b = bytes.TrimSpace(b)
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	if len(b) == 0 {
		return "(empty log)"
	}
	return string(b)
}

// kill sends SIGKILL and reaps the process. It is a no-op when the process
// is not running.
func (s *Server) kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// Kill kills the server abruptly (SIGKILL), as a crash would, and waits for
// the process to be gone. Restart brings it back on the same port, empty
// (persistence is off; a cluster node keeps its cluster configuration).
func (s *Server) Kill() { s.kill() }

// Restart starts a killed server again on the same port and waits until it
// answers.
func (s *Server) Restart() error {
	s.mu.Lock()
	running, closed := s.cmd != nil, s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("redistest: restart of a closed server")
	}
	if running {
		return nil
	}
	return s.launch()
}

// Pause stops the process (SIGSTOP) without closing its sockets: clients
// connect and send, and nothing answers, as with a hung server or a network
// partition. Resume continues it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig os.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redistest: server not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Pid returns the process ID of the running redis-server, or 0 when it is
// not running (benchmarks bind it to a CPU of its own with it).
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Running reports whether the process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Close stops the server and removes its files. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.kill()
	if s.cleanup {
		os.RemoveAll(s.dir)
	}
}

// URL returns redis://127.0.0.1:port.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Cluster is a Redis Cluster on 127.0.0.1: masters, and replicas when
// StartClusterReplicas made it.
type Cluster struct {
	Nodes    []*Server
	replicas int // per master
	dir      string
}

// StartCluster starts a cluster of masters nodes (at least 1) for tb and
// stops it when tb ends. Three or more are joined by redis-cli --cluster
// create; one or two (which redis-cli refuses) get their slots with
// CLUSTER ADDSLOTSRANGE, split as redis-cli would, and meet by CLUSTER
// MEET.
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	Require(tb)
	c, err := startCluster(tb.TempDir(), masters, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// StartClusterReplicas starts a cluster of masters (at least 3), each
// with replicas replicas, joined by redis-cli --cluster create, for tb,
// and stops it when tb ends. It returns once every replica has synced
// with its master, so that a master killed then fails over. Its nodes
// time out after nodeTimeout (cluster-node-timeout; 0: 2 s): a killed
// master's replica takes over about 2 nodeTimeout + 1 s later.
func StartClusterReplicas(tb testing.TB, masters, replicas int, nodeTimeout time.Duration) *Cluster {
	tb.Helper()
	Require(tb)
	if masters < 3 || replicas < 1 {
		tb.Fatalf("redistest: a cluster with replicas needs 3 masters or more and 1 replica or more, not %d and %d", masters, replicas)
	}
	var extra []string
	if nodeTimeout > 0 {
		extra = []string{"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10)}
	}
	c, err := startCluster(tb.TempDir(), masters, replicas, extra...)
	if err == nil {
		err = c.waitReplicas(StartTimeout)
	}
	if err != nil {
		if c != nil {
			c.Close()
		}
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// waitReplicas waits until every replica reports its link to its master
// up.
func (c *Cluster) waitReplicas(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		up, want := 0, len(c.Nodes)/(1+c.replicas)*c.replicas
		for _, n := range c.Nodes {
			v, _ := n.Do("INFO", "replication")
			if info, _ := v.(string); strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up") {
				up++
			}
		}
		if up >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: %d of %d replicas synced after %v", up, want, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Masters returns the running nodes that are masters now (ROLE).
func (c *Cluster) Masters() []*Server {
	var out []*Server
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		if v, err := n.Do("ROLE"); err == nil {
			if r, _ := v.([]any); len(r) > 0 && r[0] == "master" {
				out = append(out, n)
			}
		}
	}
	return out
}

// StartClusterProcess is StartCluster outside tests: the caller must Close.
func StartClusterProcess(masters int) (*Cluster, error) {
	if _, _, err := Binaries(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-cluster-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	c, err := startCluster(dir, masters, 0)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	c.dir = dir
	return c, nil
}

func startCluster(dir string, masters, replicas int, extra ...string) (*Cluster, error) {
	if masters < 1 {
		return nil, fmt.Errorf("redistest: a cluster needs at least 1 master, not %d", masters)
	}
	c := &Cluster{replicas: replicas}
	for i := 0; i < masters*(1+replicas); i++ {
		s, err := startServer(dir, true, extra...)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	var err error
	if masters < 3 {
		err = c.assignSlots()
	} else {
		err = c.create()
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	if err := c.WaitOK(StartTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// create joins the nodes with redis-cli --cluster create (3 or more).
func (c *Cluster) create() error {
	_, cli, err := Binaries()
	if err != nil {
		return err
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(c.replicas), "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redistest: redis-cli --cluster create: %v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// assignSlots gives each node an equal range of the 16384 slots (the
// first ones one more when they do not divide evenly), a distinct config
// epoch, and makes the nodes meet: what redis-cli --cluster create does,
// for the one or two masters it refuses.
func (c *Cluster) assignSlots() error {
	n := len(c.Nodes)
	lo := 0
	for i, s := range c.Nodes {
		hi := lo + 16384/n - 1
		if i < 16384%n {
			hi++
		}
		for _, cmd := range [][]string{
			{"CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)},
			{"CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i + 1)},
		} {
			if _, err := s.Do(cmd...); err != nil {
				return fmt.Errorf("redistest: %s on %s: %w", strings.Join(cmd, " "), s.Addr, err)
			}
		}
		lo = hi + 1
	}
	for _, s := range c.Nodes[1:] {
		if _, err := c.Nodes[0].Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(s.Port)); err != nil {
			return fmt.Errorf("redistest: CLUSTER MEET %s: %w", s.Addr, err)
		}
	}
	return nil
}

// Addrs returns the nodes' host:port addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// URL returns redis-cluster://host:port,host:port,…
func (c *Cluster) URL() string { return "redis-cluster://" + strings.Join(c.Addrs(), ",") }

// WaitOK waits until every running node reports cluster_state:ok with all
// 16384 slots assigned and knows every node.
func (c *Cluster) WaitOK(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var bad string
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			v, err := n.Do("CLUSTER", "INFO")
			info, _ := v.(string)
			switch {
			case err != nil:
				bad = fmt.Sprintf("%s: %v", n.Addr, err)
			case !strings.Contains(info, "cluster_state:ok"),
				!strings.Contains(info, "cluster_slots_assigned:16384"),
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Nodes))+"\r"):
				bad = fmt.Sprintf("%s: %q", n.Addr, info)
			}
			if bad != "" {
				break
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: cluster not ok after %v: %s", timeout, bad)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NodeFor returns the node that serves key's slot (CLUSTER KEYSLOT and
// CLUSTER SLOTS asked of a running node).
func (c *Cluster) NodeFor(key string) (*Server, error) {
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		v, err := n.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			return nil, err
		}
		slot, _ := v.(int64)
		v, err = n.Do("CLUSTER", "SLOTS")
		if err != nil {
			return nil, err
		}
		ranges, _ := v.([]any)
		for _, r := range ranges {
			r, _ := r.([]any)
			if len(r) < 3 {
				continue
			}
			lo, _ := r[0].(int64)
			hi, _ := r[1].(int64)
			master, _ := r[2].([]any)
			if slot < lo || slot > hi || len(master) < 2 {
				continue
			}
			port, _ := master[1].(int64)
			for _, m := range c.Nodes {
				if int64(m.Port) == port {
					return m, nil
				}
			}
		}
		return nil, fmt.Errorf("redistest: no node serves slot %d", slot)
	}
	return nil, errors.New("redistest: no running node")
}

// Close stops every node. It is idempotent.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

var (
	sharedMu      sync.Mutex
	sharedServer  *Server
	sharedCluster *Cluster
	sharedDir     string
	sharedErr     error
	sharedCErr    error
)

// Shared returns a standalone server shared by every test of the test
// binary, starting it on first use. Packages that use it call Main from
// TestMain, which stops it; tests must use distinct keys (Prefix) and must
// not kill it.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	Require(tb)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedServer == nil && sharedErr == nil {
		dir, err := sharedTemp()
		if err == nil {
			sharedServer, err = startServer(dir, false)
		}
		sharedErr = err
	}
	if sharedErr != nil {
		tb.Fatal(sharedErr)
	}
	return sharedServer
}

// SharedCluster returns a 3-master cluster shared by every test of the test
// binary, like Shared.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	Require(tb)
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedCluster == nil && sharedCErr == nil {
		dir, err := sharedTemp()
		if err == nil {
			sharedCluster, err = startCluster(dir, 3, 0)
		}
		sharedCErr = err
	}
	if sharedCErr != nil {
		tb.Fatal(sharedCErr)
	}
	return sharedCluster
}

func sharedTemp() (string, error) {
	if sharedDir != "" {
		return sharedDir, nil
	}
	dir, err := os.MkdirTemp("", "redistest-shared-")
	if err != nil {
		return "", fmt.Errorf("redistest: %w", err)
	}
	sharedDir = dir
	return dir, nil
}

// Main runs the tests and stops the shared servers before exiting:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the servers Shared and SharedCluster started.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedServer != nil {
		sharedServer.Close()
	}
	if sharedCluster != nil {
		sharedCluster.Close()
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	sharedServer, sharedCluster, sharedDir = nil, nil, ""
	sharedErr, sharedCErr = nil, nil
}

var prefixes atomic.Int64

// Prefix returns a key prefix unique within the test binary and naming the
// test, such as "TestApply/gcra#3:".
func Prefix(tb testing.TB) string {
	return fmt.Sprintf("%s#%d:", tb.Name(), prefixes.Add(1))
}

// Outage is a way a server goes away (Down) and comes back (Up, which
// returns once it answers), for tests of the way back to Redis.
type Outage struct {
	Name     string
	Down, Up func(*Server) error
}

// Outages are the ways a server goes away that a store must come back
// from: killed and restarted with its data (SAVE first), killed and
// restarted empty (its scripts gone too), and paused then continued
// (silent, then answering the commands it queued).
var Outages = []Outage{
	{"restart", func(s *Server) error {
		if _, err := s.Do("SAVE"); err != nil {
			return err
		}
		s.Kill()
		return nil
	}, (*Server).Restart},
	{"restart empty", func(s *Server) error { s.Kill(); return nil }, (*Server).Restart},
	{"paused", (*Server).Pause, (*Server).Resume},
}

// Back measures a store's way back to Redis through an Outage, in
// requests: Run makes Call every Pace until the store's breaker opens
// (Connected false) and a few more, brings the server back, and counts
// how many of the next After calls the failure policy answered
// (PolicyAnswers, the store's counter). A count, not a time: each call
// waits Pace first, so a slow machine fits fewer calls in an interval,
// not more.
type Back struct {
	Call          func() error // one request; an error fails the test once Redis is back
	Connected     func() bool
	PolicyAnswers func() uint64
	Pace          time.Duration
	After         int
}

// Run runs b through o on srv and returns the calls after Redis answers
// again that the failure policy answered.
func (b Back) Run(tb testing.TB, srv *Server, o Outage) uint64 {
	tb.Helper()
	wait := func(what string, f func() bool) {
		tb.Helper()
		for deadline := time.Now().Add(StartTimeout); !f(); time.Sleep(b.Pace) {
			if time.Now().After(deadline) {
				tb.Fatalf("redistest: %s: still not so after %v", what, StartTimeout)
			}
		}
	}
	wait("decided by Redis", func() bool { return b.Call() == nil && b.Connected() })
	if err := o.Down(srv); err != nil {
		tb.Fatal(err)
	}
	wait("the breaker open", func() bool { b.Call(); return !b.Connected() })
	for range 5 {
		b.Call()
		time.Sleep(b.Pace)
	}
	if err := o.Up(srv); err != nil {
		tb.Fatal(err)
	}
	if v, err := srv.Do("PING"); err != nil || v != "PONG" {
		tb.Fatalf("redistest: PING after the outage: %v, %v", v, err)
	}
	before := b.PolicyAnswers()
	for range b.After {
		time.Sleep(b.Pace)
		if err := b.Call(); err != nil {
			tb.Fatalf("redistest: after Redis is back: %v", err)
		}
	}
	return b.PolicyAnswers() - before
}
