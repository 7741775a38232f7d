package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluicehq/sluice/bench/internal/gobuild"
)

// The proxies users run in front of an API, alone or asking sluice's
// decision endpoint (decision: {proxy: …}, docs/proxies.md). Each asking
// one is configured with its ready-to-paste file from examples/proxies,
// only its addresses replaced, and asks a sluice serve of its own whose
// limits are sluice-on's (an identity descriptor, a per-IP token bucket
// that admits everything): the comparison with sluice serve proxying is
// the mode alone.
//
//   - nginx+sluice: examples/proxies/nginx.conf (auth_request), sluice on
//     the memory store; nginx+sluice-redis on the run's redis-server;
//     nginx+sluice-idle with the file's keepalive 128 (idle connections
//     to the API and to sluice) set to -idle, as the other proxies keep
//     (with fewer than the clients, nginx opens and closes connections);
//   - caddy: Caddy's reverse_proxy alone (Caddy has no rate limiter of its
//     own among its standard modules); caddy+sluice: examples/proxies/
//     Caddyfile (forward_auth);
//   - traefik: Traefik's RateLimit middleware (per source IP, a rate that
//     admits everything), in memory; traefik-redis: the same with its
//     Redis option on the run's redis-server; traefik+sluice:
//     examples/proxies/traefik.yaml and traefik-dynamic.yaml (ForwardAuth).
//
// Caddy and Traefik are built from the Go module proxy (package gobuild)
// into the user cache once; a contender whose build fails is skipped.

// redisKinds are the contenders that use the run's redis-server.
var redisKinds = []string{kindSluiceRedis, kindSluicePrefetch, kindNginxSluiceRedis, kindTraefikRedis}

// external builds Caddy and Traefik when a contender needs them (unless
// -caddy or -traefik names a binary) and returns the contenders left:
// those whose program did not build are skipped, saying why.
func (e *env) external(ctx context.Context, o options) ([]*contender, error) {
	needs := map[string]*gobuild.Program{
		kindCaddy: &gobuild.Caddy, kindCaddySluice: &gobuild.Caddy,
		kindTraefik: &gobuild.Traefik, kindTraefikRedis: &gobuild.Traefik, kindTraefikSluice: &gobuild.Traefik,
	}
	given := map[string]string{gobuild.Caddy.Name: o.caddy, gobuild.Traefik.Name: o.traefik}
	built := map[string]string{}
	failed := map[string]error{}
	var left []*contender
	for _, c := range e.contenders {
		p := needs[c.kind]
		if p == nil {
			left = append(left, c)
			continue
		}
		if _, done := built[p.Name]; !done && failed[p.Name] == nil {
			bin, err := given[p.Name], error(nil)
			if bin == "" {
				var cache string
				if cache, err = gobuild.Cache(); err == nil {
					bin, err = p.Build(ctx, cache, o.progress)
				}
			}
			if err != nil {
				failed[p.Name] = err
				fmt.Fprintf(o.progress, "%s %s did not build, so its contenders are skipped: %v\n", p.Name, p.Version, err)
			} else {
				built[p.Name] = bin
			}
		}
		if err := failed[p.Name]; err != nil {
			fmt.Fprintf(o.progress, "skipping %s: %s %s did not build\n", c.name, p.Name, p.Version)
			continue
		}
		left = append(left, c)
	}
	if len(left) == 0 {
		return nil, fmt.Errorf("no contenders left to measure")
	}
	e.bins.caddy, e.bins.traefik = built[gobuild.Caddy.Name], built[gobuild.Traefik.Name]
	return left, ctx.Err()
}

// start starts c (and its decision endpoint) and waits until it answers
// a request to o.path with 200.
func (e *env) start(c *contender, o options) error {
	up, pprof := e.upstream.url, o.profile != ""
	upHost := strings.TrimPrefix(up, "http://")
	store := "memory"
	if c.redis {
		store = e.redis.URL()
		if c.kind == kindSluicePrefetch {
			store += "?prefetch=on"
		}
	}
	var err error
	switch c.kind {
	case kindNginx:
		c.p, err = startNginxProxy(e.dir, c.name, upHost, o.idle)
	case kindGoProxy, kindGoPlain:
		c.p, err = startGoProxy(e.bins.goproxy, c.name, up, o.idle, c.kind == kindGoProxy)
	case kindSluiceOff, kindSluiceOn, kindSluiceRedis, kindSluicePrefetch:
		c.p, err = startSluice(cmp.Or(c.bin, e.bins.sluice), e.dir, c.name, up, c.kind == kindSluiceOff, store, pprof)
	case kindQuota, kindJournal:
		c.p, err = startSluiceQuota(e.bins.sluice, e.dir, c.name, up, c.kind == kindJournal, pprof)
	case kindCaddy:
		c.p, err = e.startCaddy(c.name, "", upHost)
	case kindTraefik, kindTraefikRedis:
		c.p, err = e.startTraefik(c, "")
	default: // a proxy asking sluice
		proxy := map[string]string{kindNginxSluice: "nginx", kindNginxSluiceIdle: "nginx", kindNginxSluiceRedis: "nginx", kindCaddySluice: "forwarded", kindTraefikSluice: "forwarded"}[c.kind]
		if c.decider, err = startDecider(e.bins.sluice, e.dir, c.name+"-decision", proxy, store, pprof); err != nil {
			return err
		}
		sl := strings.TrimPrefix(c.decider.url, "http://")
		switch c.kind {
		case kindCaddySluice:
			c.p, err = e.startCaddy(c.name, sl, upHost)
		case kindTraefikSluice:
			c.p, err = e.startTraefik(c, sl)
		default:
			c.p, err = e.startNginxAsking(c.name, sl, upHost, c.kind == kindNginxSluiceIdle, o.idle)
		}
	}
	if err != nil {
		return err
	}
	return ready(c.p, c.p.url+o.path)
}

// ready waits (30 s at most) until url answers 200: a proxy with a file
// of routes may listen before it has read them.
func ready(p *proc, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		res, err := client.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			last = res.Status
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %s", p.name, p.out.String())
		default:
		}
	}
	return fmt.Errorf("%s: %s did not answer 200 within 30 s (last: %s): %s", p.name, url, last, p.out.String())
}

// startDecider runs sluice serve as the decision endpoint of proxy, with
// sluice-on's limits, believing the original request from 127.0.0.1.
func startDecider(bin, dir, name, proxy, store string, pprof bool) (*proc, error) {
	return startServe(bin, dir, name, fmt.Sprintf(sluiceConfig,
		"decision: {proxy: "+proxy+"}\nidentity: {trusted_proxies: [127.0.0.1]}", pprof, "store: "+store,
		admitAll("per-ip"), admitAll("per-user")))
}

// example returns examples/proxies/name with each old string replaced by
// its new one (old, new, …); an old string the file lacks is an error, so
// that a change to the examples cannot go unmeasured.
func example(name string, repl ...string) (string, error) {
	_, root, err := dirs()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "examples", "proxies", name))
	if err != nil {
		return "", err
	}
	s := string(b)
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			return "", fmt.Errorf("examples/proxies/%s has no %q to replace", name, repl[i])
		}
		s = strings.ReplaceAll(s, repl[i], repl[i+1])
	}
	return s, nil
}

// startNginxAsking runs nginx with examples/proxies/nginx.conf in front
// of upstream, asking the sluice at decider (both host:port).
// With raise, its keepalive (idle connections to each) is idle.
func (e *env) startNginxAsking(name, decider, upstream string, raise bool, idle int) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	repl := []string{"listen 8000;", "listen " + addr + ";",
		"server 127.0.0.1:3000;", "server " + upstream + ";", "server 127.0.0.1:8181;", "server " + decider + ";"}
	if raise {
		repl = append(repl, "keepalive 128;", fmt.Sprintf("keepalive %d;", idle))
	}
	conf, err := example("nginx.conf", repl...)
	if err != nil {
		return nil, err
	}
	return startNginx(e.dir, name, conf, addr)
}

// caddyAlone is Caddy proxying alone.
const caddyAlone = `{
	admin off
}

:%s {
	bind 127.0.0.1
	reverse_proxy %s
}
`

// startCaddy runs Caddy in front of upstream: alone, or with
// examples/proxies/Caddyfile asking the sluice at decider.
func (e *env) startCaddy(name, decider, upstream string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	conf := fmt.Sprintf(caddyAlone, port, upstream)
	if decider != "" {
		if conf, err = example("Caddyfile", "127.0.0.1:8181", decider, "127.0.0.1:3000", upstream, ":8000 {", ":"+port+" {\n\tbind 127.0.0.1"); err != nil {
			return nil, err
		}
	}
	home := filepath.Join(e.dir, name)
	file := filepath.Join(home, "Caddyfile")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(e.bins.caddy, "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+home, "XDG_DATA_HOME="+home, "HOME="+home)
	return launchListening(name, cmd, addr)
}

// traefikAlone is Traefik's dynamic config with its RateLimit middleware
// (per source IP, the default) admitting everything; %[3]s adds its
// Redis option.
const traefikAlone = `http:
  routers:
    api:
      entryPoints: [web]
      rule: PathPrefix(` + "`/`" + `)
      middlewares: [limit]
      service: api
  middlewares:
    limit:
      rateLimit:
        average: 1000000000
        burst: 1000000000%[2]s
  services:
    api:
      loadBalancer:
        servers:
          - url: %[1]s
`

// startTraefik runs Traefik with examples/proxies/traefik.yaml (its
// listener and log level set) in front of the upstream: with its own
// RateLimit middleware, or examples/proxies/traefik-dynamic.yaml asking
// the sluice at decider.
func (e *env) startTraefik(c *contender, decider string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(e.dir, c.name)
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	dynFile, staticFile := filepath.Join(home, "dynamic.yaml"), filepath.Join(home, "traefik.yaml")
	redis := ""
	if c.redis {
		redis = "\n        redis:\n          endpoints: [" + e.redis.Addr + "]"
	}
	dyn := fmt.Sprintf(traefikAlone, e.upstream.url, redis)
	if decider != "" {
		if dyn, err = example("traefik-dynamic.yaml", "http://127.0.0.1:8181/auth", "http://"+decider+"/auth", "http://127.0.0.1:3000", e.upstream.url); err != nil {
			return nil, err
		}
	}
	static, err := example("traefik.yaml", `address: ":8000"`, `address: "`+addr+`"`, "filename: traefik-dynamic.yaml", "filename: "+dynFile)
	if err != nil {
		return nil, err
	}
	static += "global: {checkNewVersion: false, sendAnonymousUsage: false}\nlog: {level: ERROR}\n"
	for f, text := range map[string]string{dynFile: dyn, staticFile: static} {
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(e.bins.traefik, "--configFile="+staticFile)
	cmd.Dir, cmd.Env = home, append(os.Environ(), "HOME="+home)
	return launchListening(c.name, cmd, addr)
}

// launchListening starts cmd and waits until it listens on addr.
func launchListening(name string, cmd *exec.Cmd, addr string) (*proc, error) {
	p, err := launch(name, cmd)
	if err != nil {
		return nil, err
	}
	if err := waitListening(p, addr, ""); err != nil {
		return nil, err
	}
	p.url = "http://" + addr
	return p, nil
}
