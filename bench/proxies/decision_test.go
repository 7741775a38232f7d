package proxies

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// build runs go build -o dir/name pkg in the module at modDir.
func build(t *testing.T, modDir, dir, name, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = modDir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// example reads examples/proxies/name with the replacements (old, new, ...),
// each of which must apply.
func example(t *testing.T, name string, repl ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "proxies", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for i := 0; i+1 < len(repl); i += 2 {
		if !strings.Contains(s, repl[i]) {
			t.Fatalf("examples/proxies/%s has no %q", name, repl[i])
		}
		s = strings.ReplaceAll(s, repl[i], repl[i+1])
	}
	return s
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// run starts a process and stops it when the test ends; ready, when not
// nil, is waited for in its output (a minute at most) and its first group
// returned.
func run(t *testing.T, ready *regexp.Regexp, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		pw.Close()
	})
	found := make(chan string, 1)
	var mu sync.Mutex
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if ready != nil {
				if m := ready.FindStringSubmatch(sc.Text()); m != nil {
					found <- m[len(m)-1]
					ready = nil
				}
			}
		}
	}()
	if ready == nil {
		return ""
	}
	select {
	case m := <-found:
		return m
	case <-time.After(time.Minute):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%s did not start: %s", bin, log.String())
	}
	return ""
}

// waitListen waits (a minute at most) until addr accepts connections.
func waitListen(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens on %s", addr)
}

type seen struct {
	mu  sync.Mutex
	who []string
}

func (s *seen) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.who...)
}

// deciders are the decision endpoints a proxy test puts its proxies in
// front of, and the upstream behind them.
type deciders struct {
	dir      string   // the test's files (keys.txt, the configs)
	sluices  []string // each sluice serve's host:port
	upstream string   // the upstream's URL
	up       *seen    // the identity headers of each request the upstream saw
}

// startDeciders builds sluice and starts n `sluice serve` with
// examples/proxies/sluice.yaml (decision.proxy: forwarded), all on one
// real Redis, and an upstream that records the identity headers it sees.
func startDeciders(t *testing.T, n int) deciders {
	t.Helper()
	sluice := build(t, filepath.Join("..", ".."), t.TempDir(), "sluice", "./cmd/sluice")
	rs := redistest.Start(t)
	up := &seen{}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.mu.Lock()
		up.who = append(up.who, strings.TrimSpace(r.Header.Get("X-Sluice-Identity-Kind")+" "+r.Header.Get("X-Sluice-User")+" "+r.Header.Get("X-Sluice-Tier")))
		up.mu.Unlock()
		w.Write([]byte("ok\n"))
	}))
	t.Cleanup(upstream.Close)
	d := deciders{dir: t.TempDir(), upstream: upstream.URL, up: up}
	if err := os.WriteFile(filepath.Join(d.dir, "keys.txt"), []byte(example(t, "../keys.txt")), 0o644); err != nil {
		t.Fatal(err)
	}
	listening := regexp.MustCompile(`msg="sluice serve: listening" addr=(\S+)`)
	for i := range n {
		cfg := filepath.Join(d.dir, fmt.Sprintf("sluice-%d.yaml", i))
		if err := os.WriteFile(cfg, []byte(example(t, "sluice.yaml", "proxy: nginx", "proxy: forwarded",
			"store: memory", "store: "+rs.URL(), "../keys.txt", "keys.txt")), 0o644); err != nil {
			t.Fatal(err)
		}
		d.sluices = append(d.sluices, run(t, listening, sluice, "serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"))
	}
	return d
}

// checkOneBudget sends requests through the proxies at fronts (URLs, each
// asking its own sluice, the sluices on one Redis): a client spends one
// budget through either, then gets 429 with Retry-After, the RateLimit
// headers and problem+json; the upstream sees the identity sluice
// resolved, never the client's own X-Sluice-User; alice's key is
// admitted as alice, a wrong key is 401.
func checkOneBudget(t *testing.T, proxy string, fronts []string, up *seen) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	get := func(url string, hdr ...string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, res.Header, string(b)
	}
	var got []int
	var h http.Header
	var body string
	for i := range 6 {
		var code int
		code, h, body = get(fronts[i%len(fronts)]+"/api/items?page=2", "X-Sluice-User", "mallory", "X-Sluice-Tier", "gold", "X-Sluice-Identity-Kind", "api_key")
		got = append(got, code)
	}
	if fmt.Sprint(got) != "[200 200 200 200 200 429]" {
		t.Fatalf("one client through %d %s on one Redis: %v, want one burst of 5 [200 200 200 200 200 429]; last: %v %s", len(fronts), proxy, got, h, body)
	}
	if h.Get("Retry-After") == "" || h.Get("RateLimit") == "" || h.Get("RateLimit-Policy") == "" ||
		h.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, `"status":429`) {
		t.Errorf("the 429 through %s: %v %q, want Retry-After, RateLimit, RateLimit-Policy and problem+json", proxy, h, body)
	}
	t.Logf("the 429 through %s: Retry-After %s, RateLimit %s, RateLimit-Policy %s, %s",
		proxy, h.Get("Retry-After"), h.Get("RateLimit"), h.Get("RateLimit-Policy"), body)
	for i, s := range up.all() {
		if s != "ip" {
			t.Errorf("upstream request %d came as %q, want ip (anonymous, the client's X-Sluice-* replaced)", i, s)
		}
	}
	if code, _, _ := get(fronts[0] + "/api//items"); code != http.StatusTooManyRequests {
		t.Errorf("/api//items after the budget is spent: %d, want 429", code)
	}
	if code, _, b := get(fronts[len(fronts)-1]+"/api/items", "X-API-Key", "example-key-alice"); code != 200 {
		t.Fatalf("alice through %s: %d %s, want 200", proxy, code, b)
	}
	if all := up.all(); all[len(all)-1] != "api_key alice pro" {
		t.Errorf("the upstream saw alice as %q, want \"api_key alice pro\"", all[len(all)-1])
	}
	if code, _, _ := get(fronts[0]+"/api/items", "X-API-Key", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("a wrong key through %s: %d, want 401", proxy, code)
	}
}
