package gateway_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/identity"
)

func TestWatchFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	must(t, os.WriteFile(file, []byte("a"), 0o644))
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		go gateway.WatchFile(t.Context(), file, time.Second, func() { n.Add(1) })
		step := func(want int32) {
			t.Helper()
			time.Sleep(1500 * time.Millisecond)
			synctest.Wait()
			if got := n.Load(); got != want {
				t.Errorf("changes seen = %d, want %d", got, want)
			}
		}
		step(0)
		must(t, os.WriteFile(file, []byte("b"), 0o644))
		step(1)
		// Same content, new modification time: no reload.
		must(t, os.Chtimes(file, time.Now(), time.Now().Add(time.Hour)))
		step(1)
		// A missing file is skipped until it is back.
		must(t, os.Remove(file))
		step(1)
		must(t, os.WriteFile(file, []byte("c"), 0o644))
		step(2)
	})
}

// TestFileWatcherBaseline checks that a FileWatcher reports a change made
// after it was made but before Run started (the window in which a server
// loads its config and starts its listeners).
func TestFileWatcherBaseline(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gw.yaml")
	must(t, os.WriteFile(file, []byte("a"), 0o644))
	synctest.Test(t, func(t *testing.T) {
		w := gateway.NewFileWatcher(file)
		must(t, os.WriteFile(file, []byte("b"), 0o644)) // before Run
		var n atomic.Int32
		go w.Run(t.Context(), time.Second, func([]string) { n.Add(1) })
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := n.Load(); got != 1 {
			t.Errorf("changes seen = %d, want 1 (the one made before Run)", got)
		}
	})
}

// TestFileWatcherSet checks that Set adds files read now, keeps the
// baseline of files already watched, and forgets the others.
func TestFileWatcherSet(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	must(t, os.WriteFile(a, []byte("a"), 0o644))
	must(t, os.WriteFile(b, []byte("b"), 0o644))
	synctest.Test(t, func(t *testing.T) {
		w := gateway.NewFileWatcher(a)
		var n atomic.Int32
		go w.Run(t.Context(), time.Second, func([]string) { n.Add(1) })
		step := func(what string, want int32) {
			t.Helper()
			time.Sleep(1500 * time.Millisecond)
			synctest.Wait()
			if got := n.Load(); got != want {
				t.Errorf("%s: changes seen = %d, want %d", what, got, want)
			}
		}
		must(t, os.WriteFile(a, []byte("a2"), 0o644)) // seen against a's first content...
		w.Set(a, b)                                   // ...which Set keeps
		step("a changed", 1)
		must(t, os.WriteFile(b, []byte("b2"), 0o644))
		step("b changed", 2)
		w.Set(b)
		must(t, os.WriteFile(a, []byte("a3"), 0o644))
		step("a no longer watched", 2)
		if got := w.Files(); len(got) != 1 || got[0] != b {
			t.Errorf("Files() = %v, want [%s]", got, b)
		}
	})
}

// watchConfig is a gateway whose only limit is per user, with the keys
// of key-alice and key-bob in keys.txt and an HS256 JWT key in jwt.key.
const watchConfig = `
upstream: builtin:echo
identity:
  api_keys_file: keys.txt
  jwt: {alg: HS256, key_file: jwt.key}
routes:
  - path: /
    rate_limits: [{actions: [{identity: {}}]}]
rules:
  domain: w
  descriptors:
    - key: user
      rate_limit: {name: per-user, algorithm: token_bucket, unit: hour, requests_per_unit: 1000}
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: hour, requests_per_unit: 1000}
`

// watched is a gateway serving dir/gateway.yaml on loopback, reloaded
// by Watch.
type watched struct {
	g      *gateway.Gateway
	w      *gateway.FileWatcher
	url    string
	dir    string
	file   string
	reg    *prometheus.Registry
	logs   *lockedBuffer
	reload chan string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startWatched writes files (name, content pairs; gateway.yaml is the
// config) to a new directory and serves it as sluice serve does: the
// watcher is made before the config is read, set to its files before New
// reads them, and Watch polls every interval. With serve false nothing
// listens. Everything stops when the test ends.
func startWatched(t *testing.T, interval time.Duration, serve bool, files ...string) *watched {
	t.Helper()
	dir := t.TempDir()
	for i := 0; i+1 < len(files); i += 2 {
		must(t, os.WriteFile(filepath.Join(dir, files[i]), []byte(files[i+1]), 0o644))
	}
	s := &watched{dir: dir, file: filepath.Join(dir, "gateway.yaml"), reg: prometheus.NewRegistry(),
		logs: &lockedBuffer{}, reload: make(chan string)}
	w := gateway.NewFileWatcher(s.file)
	s.w = w
	cfg, err := gateway.ParseFile(s.file)
	must(t, err)
	w.Set(gateway.ConfigFiles(cfg)...)
	s.g, err = gateway.New(t.Context(), cfg, gateway.Options{Registry: s.reg, Logger: slog.New(slog.NewTextHandler(s.logs, nil))})
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.g.Watch(ctx, s.file, w, interval, s.reload) }()
	if serve {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		s.url = "http://" + ln.Addr().String()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.g.Serve(ctx, ln, nil); err != nil {
				t.Errorf("Serve = %v", err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := s.g.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	return s
}

// write replaces the file name in one step (a new file renamed over
// it), so that the watcher never reads it half written.
func (s *watched) write(t *testing.T, name, content string) {
	t.Helper()
	tmp := filepath.Join(s.dir, "."+name+".tmp")
	must(t, os.WriteFile(tmp, []byte(content), 0o644))
	must(t, os.Rename(tmp, filepath.Join(s.dir, name)))
}

// reloads returns sluice_gateway_config_reloads_total{result=result}.
func (s *watched) reloads(t *testing.T, result string) float64 {
	t.Helper()
	mfs, err := s.reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "sluice_gateway_config_reloads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func (s *watched) status(t *testing.T, hdr ...string) int {
	t.Helper()
	req, err := http.NewRequest("GET", s.url+"/", nil)
	must(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// eventually polls cond until it holds, for up to a minute (a bound, not
// a timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

func signHS256(secret, claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	signing := enc([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc([]byte(claims))
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(signing))
	return signing + "." + enc(m.Sum(nil))
}

// TestWatchRevokesKeys checks that the files the config reads are watched
// like the config itself: an API key removed from the keys file, or a JWT
// signed with a replaced secret, gets 401 within the watch interval,
// without a signal or a change to the config file.
func TestWatchRevokesKeys(t *testing.T) {
	t.Parallel()
	const oldSecret, newSecret = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	keys := identity.HashKey("key-alice") + " alice\n" + identity.HashKey("key-bob") + " bob\n"
	s := startWatched(t, 20*time.Millisecond, true, "gateway.yaml", watchConfig, "keys.txt", keys, "jwt.key", oldSecret+"\n")
	claims := fmt.Sprintf(`{"sub":"carol","exp":%d}`, time.Now().Add(time.Hour).Unix())
	oldTok, newTok := "Bearer "+signHS256(oldSecret, claims), "Bearer "+signHS256(newSecret, claims)
	for _, h := range [][]string{{"X-API-Key", "key-alice"}, {"X-API-Key", "key-bob"}, {"Authorization", oldTok}} {
		if code := s.status(t, h...); code != 200 {
			t.Fatalf("%v before revocation: %d, want 200", h, code)
		}
	}

	// Revoke alice's key: the keys file alone changes.
	s.write(t, "keys.txt", identity.HashKey("key-bob")+" bob\n")
	eventually(t, "revoked key gets 401", func() bool { return s.status(t, "X-API-Key", "key-alice") == 401 })
	if code := s.status(t, "X-API-Key", "key-bob"); code != 200 {
		t.Errorf("bob's key after alice's revocation: %d, want 200", code)
	}

	// Rotate the JWT secret: tokens signed with the old one are refused.
	s.write(t, "jwt.key", newSecret+"\n")
	eventually(t, "token signed with the old secret gets 401", func() bool { return s.status(t, "Authorization", oldTok) == 401 })
	if code := s.status(t, "Authorization", newTok); code != 200 {
		t.Errorf("token signed with the new secret: %d, want 200", code)
	}
	if got := s.reloads(t, "ok"); got != 2 {
		t.Errorf("reloads ok = %v, want 2 (one per changed file)", got)
	}

	// A new keys file the config switches to is watched from then on.
	s.write(t, "keys2.txt", identity.HashKey("key-dave")+" dave\n")
	s.write(t, "gateway.yaml", strings.Replace(watchConfig, "keys.txt", "keys2.txt", 1))
	eventually(t, "the new keys file is used", func() bool { return s.status(t, "X-API-Key", "key-dave") == 200 })
	s.write(t, "keys2.txt", identity.HashKey("key-erin")+" erin\n")
	eventually(t, "a key revoked from the new keys file gets 401", func() bool { return s.status(t, "X-API-Key", "key-dave") == 401 })
	// The old keys file is no longer watched.
	want := []string{filepath.Join(s.dir, "gateway.yaml"), filepath.Join(s.dir, "jwt.key"), filepath.Join(s.dir, "keys2.txt")}
	if got := s.w.Files(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("watched files = %v, want %v", got, want)
	}
	if got := s.reloads(t, "invalid"); got != 0 {
		t.Errorf("reloads invalid = %v, want 0:\n%s", got, s.logs.String())
	}
}

// TestWatchCountsEveryRefusedConfig checks that every refused config is
// logged once and counted once in reloads{result="invalid"}, whatever
// refused it. Parse errors were logged but not counted when sluice serve
// reloaded, so six refused configs showed as one.
func TestWatchCountsEveryRefusedConfig(t *testing.T) {
	t.Parallel()
	keys := identity.HashKey("key-alice") + " alice\n"
	secret := "0123456789abcdef0123456789abcdef\n"
	synctest.Test(t, func(t *testing.T) {
		s := startWatched(t, time.Second, false, "gateway.yaml", watchConfig, "keys.txt", keys, "jwt.key", secret)
		first := s.g.Config()
		refused := []struct {
			name string
			make func()
		}{
			{"YAML syntax error", func() { s.write(t, "gateway.yaml", "routes: [\n") }},
			{"unknown field", func() { s.write(t, "gateway.yaml", watchConfig+"colour: blue\n") }},
			{"bad rule unit", func() { s.write(t, "gateway.yaml", strings.Replace(watchConfig, "unit: hour", "unit: fortnight", 1)) }},
			{"missing keys file", func() { s.write(t, "gateway.yaml", strings.Replace(watchConfig, "keys.txt", "keys2.txt", 1)) }},
			// The refused config's keys file is watched: creating it
			// retries the config, refused again for its content.
			{"bad keys file", func() { s.write(t, "keys2.txt", "not a key line\n") }},
			{"unreadable config file (SIGHUP)", func() {
				must(t, os.Remove(s.file))
				s.reload <- "SIGHUP"
			}},
		}
		for i, r := range refused {
			r.make()
			// Three polls: one sees the change, the others must not
			// count it again.
			time.Sleep(3 * time.Second)
			synctest.Wait()
			if got := s.reloads(t, "invalid"); got != float64(i+1) {
				t.Errorf("after %s: reloads invalid = %v, want %d", r.name, got, i+1)
			}
			if got := strings.Count(s.logs.String(), "config refused"); got != i+1 {
				t.Errorf("after %s: %d config refused log lines, want %d", r.name, got, i+1)
			}
		}
		if s.g.Config() != first || s.reloads(t, "ok") != 0 {
			t.Errorf("a refused config was served (reloads ok %v)", s.reloads(t, "ok"))
		}
		if !strings.Contains(s.logs.String(), "trigger=SIGHUP") {
			t.Errorf("the SIGHUP reload does not log its trigger:\n%s", s.logs.String())
		}
		// A good config again is served, and counted as such.
		s.write(t, "gateway.yaml", watchConfig)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if s.g.Config() == first || s.reloads(t, "ok") != 1 || s.reloads(t, "invalid") != float64(len(refused)) {
			t.Errorf("after a good config: reloads ok %v invalid %v, want 1 and %d", s.reloads(t, "ok"), s.reloads(t, "invalid"), len(refused))
		}
	})
}
