package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a server process the harness started.
type proc struct {
	name  string
	url   string // where to send the load (proxies), or the base URL (upstream)
	admin string // sluice serve's admin listener
	cmd   *exec.Cmd
	out   *syncBuffer
	done  chan struct{}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop ends the process: SIGTERM, then SIGKILL after 5 s.
func (p *proc) stop() {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
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
		return len(p), nil // enough to say what went wrong
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launch starts cmd with its output kept, and a goroutine that waits for it.
func launch(name string, cmd *exec.Cmd) (*proc, error) {
	p := &proc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = p.out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.out
	}
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// waitListening waits until addr accepts connections or p exits.
func waitListening(p *proc, addr string, logFile string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			log, _ := os.ReadFile(logFile)
			return fmt.Errorf("%s exited: %s%s", p.name, p.out.String(), log)
		default:
		}
		if time.Now().After(deadline) {
			p.stop()
			return fmt.Errorf("%s did not listen on %s within 10 s: %s", p.name, addr, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// dirs finds the bench module (the directory of the go.mod of
// github.com/sluicehq/sluice/bench, from the working directory up) and the
// sluice module above it.
func dirs() (bench, root string, err error) {
	d, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/sluicehq/sluice/bench\n") {
			return d, filepath.Dir(d), nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", "", errors.New("run from the sluice checkout (bench/ or below)")
		}
		d = up
	}
}

// binaries are the programs the harness builds.
type binaries struct {
	sluice, goproxy, gwload string
	caddy, traefik          string // built by env.external when a contender needs them
}

// build builds sluice from the checkout (unless withSluice is false) and
// the harness's two programs into dir.
func build(ctx context.Context, dir string, withSluice bool) (binaries, error) {
	bench, root, err := dirs()
	if err != nil {
		return binaries{}, err
	}
	b := binaries{
		sluice:  filepath.Join(dir, "sluice"),
		goproxy: filepath.Join(dir, "goproxy"),
		gwload:  filepath.Join(dir, "gwload"),
	}
	for _, s := range []struct{ dir, out, pkg string }{
		{root, b.sluice, "./cmd/sluice"},
		{bench, b.goproxy, "./gateway/cmd/goproxy"},
		{bench, b.gwload, "./gateway/cmd/gwload"},
	} {
		if s.out == b.sluice && !withSluice {
			continue
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-o", s.out, s.pkg)
		cmd.Dir = s.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return binaries{}, fmt.Errorf("go build %s: %v\n%s", s.pkg, err, out)
		}
	}
	return b, nil
}

// nginxBinary finds nginx on PATH or in /usr/sbin (Debian).
func nginxBinary() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", errors.New("nginx not found (Debian: apt-get install nginx-light)")
}

// nginxMain is the part of every nginx config the harness writes: one
// process (master_process off: the process started is the worker, whose
// CPU is the figure), in the foreground, files under the prefix %[1]s.
const nginxMain = `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path %[1]s/tmp/body;
    proxy_temp_path %[1]s/tmp/proxy;
    fastcgi_temp_path %[1]s/tmp/fastcgi;
    uwsgi_temp_path %[1]s/tmp/uwsgi;
    scgi_temp_path %[1]s/tmp/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
%[2]s
}
`

// upstreamHTTP is the upstream: 200 with a small body.
const upstreamHTTP = `    server {
        listen %s;
        default_type text/plain;
        location / { return 200 "hello from the upstream\n"; }
    }`

// proxyHTTP is nginx as the limiting proxy: limit_req keyed by client IP
// at a rate that admits everything, keep-alive connections to the upstream.
const proxyHTTP = `    limit_req_zone $binary_remote_addr zone=perip:10m rate=1000000r/s;
    limit_req_status 429;
    upstream up {
        server %[2]s;
        keepalive %[3]d;
        keepalive_requests 1000000;
    }
    server {
        listen %[1]s;
        location / {
            limit_req zone=perip burst=1000 nodelay;
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }`

// startNginx runs nginx with the http block body in a prefix directory
// under dir.
func startNginx(dir, name, body, addr string) (*proc, error) {
	bin, err := nginxBinary()
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Join(prefix, "tmp"), 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxMain, prefix, body), 0o644); err != nil {
		return nil, err
	}
	logFile := filepath.Join(prefix, "error.log")
	p, err := launch(name, exec.Command(bin, "-p", prefix, "-c", conf, "-e", logFile))
	if err != nil {
		return nil, err
	}
	if err := waitListening(p, addr, logFile); err != nil {
		return nil, err
	}
	p.url = "http://" + addr
	return p, nil
}

// startUpstream runs the upstream nginx.
func startUpstream(dir string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return startNginx(dir, "upstream", fmt.Sprintf(upstreamHTTP, addr), addr)
}

// startNginxProxy runs nginx limit_req in front of upstream (host:port).
func startNginxProxy(dir, name, upstream string, idle int) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return startNginx(dir, name, fmt.Sprintf(proxyHTTP, addr, upstream, idle), addr)
}

// startGoProxy runs the bare ReverseProxy program.
func startGoProxy(bin, name, upstreamURL string, idle int, pool bool) (*proc, error) {
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-upstream", upstreamURL, "-idle", fmt.Sprint(idle), fmt.Sprintf("-buffer-pool=%t", pool))
	return startPrinting(name, cmd, regexp.MustCompile(`^listening (\S+)`), true)
}

// sluiceConfig is sluice serve's config: one identity descriptor matched to
// a limit for each IP (and one for each user, for callers with a user,
// which the load has none of), with more top-level settings.
const sluiceConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
%s
pprof: %t
%s
routes:
  - path: /
    rate_limits:
      - actions: [{identity: {}}]
rules:
  domain: bench
  descriptors:
    - key: remote_address
      %s
    - key: user
      %s
`

// startSluice runs sluice serve: limits off (disabled) or on, a token
// bucket a second that admits everything, on store ("memory" or a
// redis:// URL), with /debug/pprof/ on its admin listener when pprof is
// true.
func startSluice(bin, dir, name, upstreamURL string, disabled bool, store string, pprof bool) (*proc, error) {
	return startServe(bin, dir, name, fmt.Sprintf(sluiceConfig, "upstream: "+upstreamURL, pprof, fmt.Sprintf("disabled: %t\nstore: %s", disabled, store),
		admitAll("per-ip"), admitAll("per-user")))
}

// admitAll is the limit of sluiceConfig's descriptors: a token bucket a
// second that admits everything.
func admitAll(name string) string {
	return "rate_limit: {name: " + name + ", algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}"
}

// startSluiceQuota runs sluice serve with a monthly quota per IP that
// admits everything, on the memory store with a snapshot file (an hour
// apart: the run sees none) and the journal of quota charges on or off.
func startSluiceQuota(bin, dir, name, upstreamURL string, journal, pprof bool) (*proc, error) {
	snap := filepath.Join(dir, name+".snap")
	return startServe(bin, dir, name, fmt.Sprintf(sluiceConfig, "upstream: "+upstreamURL, pprof, fmt.Sprintf("snapshot: {file: %s, interval: 1h, journal: %t}", snap, journal),
		"quota: {period: month, limit: 1000000000000}", "quota: {period: month, limit: 1000000000000}"))
}

// startServe writes cfg to dir/name.yaml and runs sluice serve with it.
func startServe(bin, dir, name, cfg string) (*proc, error) {
	file := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--config", file)
	return startPrinting(name, cmd, regexp.MustCompile(`msg="sluice serve: listening" addr=(\S+) admin=(\S+)`), false)
}

// startPrinting starts a server that says its address in a line of its
// standard output (stdout) or standard error, matched by re: its first
// group is the address, a second one the admin listener's.
func startPrinting(name string, cmd *exec.Cmd, re *regexp.Regexp, stdout bool) (*proc, error) {
	var pipe io.ReadCloser
	var err error
	if stdout {
		pipe, err = cmd.StdoutPipe()
	} else {
		pipe, err = cmd.StderrPipe()
	}
	if err != nil {
		return nil, err
	}
	p, err := launch(name, cmd)
	if err != nil {
		return nil, err
	}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			if !sent {
				if m := re.FindStringSubmatch(line); m != nil {
					found <- m
					sent = true
					continue
				}
			}
			p.out.Write([]byte(line + "\n"))
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case m, ok := <-found:
		if !ok {
			<-p.done
			return nil, fmt.Errorf("%s exited before listening: %s", name, p.out.String())
		}
		p.url = "http://" + m[1]
		if len(m) > 2 {
			p.admin = m[2]
		}
		return p, nil
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s did not say its address within 30 s: %s", name, p.out.String())
	}
}
