package accesslog_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/internal/server/accesslog"
)

// lockedBuffer is a writer safe for the writer goroutine and the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines(t *testing.T) []map[string]string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]string
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]string
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		if len(sc.Bytes())+1 > accesslog.MaxLineBytes {
			t.Errorf("line of %d bytes, over MaxLineBytes %d", len(sc.Bytes())+1, accesslog.MaxLineBytes)
		}
		out = append(out, m)
	}
	return out
}

func newLog(t *testing.T, w *lockedBuffer, opts accesslog.Options) *accesslog.Log {
	t.Helper()
	opts.Writer = w
	l, err := accesslog.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A flood of 10 000 decisions over 10 s writes at most MaxPerSecond lines in
// any second; every other decision is counted as dropped.
func TestFloodIsBoundedPerSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &lockedBuffer{}
		const max = 50
		l := newLog(t, w, accesslog.Options{Server: "gateway", MaxPerSecond: max})
		const n = 10000
		for i := range n {
			l.Log(accesslog.Entry{Rule: "api", Outcome: accesslog.Denied, Layer: "rate_limit", Identity: "user:alice"})
			if i%10 == 9 {
				time.Sleep(10 * time.Millisecond)
			}
		}
		l.Close()
		lines := w.lines(t)
		perSec := map[string]int{}
		for _, m := range lines {
			perSec[m["time"][:19]]++
		}
		for sec, c := range perSec {
			if c > max {
				t.Errorf("%s: %d lines, over %d", sec, c, max)
			}
		}
		if len(perSec) < 9 {
			t.Errorf("lines in %d seconds, want about 10", len(perSec))
		}
		if got := uint64(len(lines)) + l.Dropped(); got != n {
			t.Errorf("lines %d + dropped %d = %d, want %d", len(lines), l.Dropped(), got, n)
		}
		if l.Dropped() < n-11*max {
			t.Errorf("dropped %d, want at least %d", l.Dropped(), n-11*max)
		}
	})
}

// A huge client value is cut: the line stays under MaxLineBytes and is
// still JSON.
func TestLineIsBounded(t *testing.T) {
	w := &lockedBuffer{}
	l := newLog(t, w, accesslog.Options{Server: "gateway", Identity: accesslog.Clear})
	huge := strings.Repeat("\x01\"é", 100000)
	l.Log(accesslog.Entry{Rule: huge, Outcome: accesslog.Denied, Layer: huge, Identity: huge, Method: huge, Path: huge,
		Domain: huge, Descriptor: huge})
	l.Close()
	lines := w.lines(t) // checks MaxLineBytes
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1", len(lines))
	}
	if !strings.HasSuffix(lines[0]["path"], "[cut]") {
		t.Errorf("path %q not marked as cut", lines[0]["path"][len(lines[0]["path"])-20:])
	}
}

// A hashed identity is the same for the same caller, differs between
// callers, and is not the clear value.
func TestHashedIdentity(t *testing.T) {
	w := &lockedBuffer{}
	l := newLog(t, w, accesslog.Options{Server: "rls", Identity: accesslog.Hashed})
	for _, id := range []string{"user:alice", "user:bob", "user:alice"} {
		l.Log(accesslog.Entry{Rule: "api", Outcome: accesslog.Denied, Identity: id})
	}
	l.Close()
	lines := w.lines(t)
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	a, b, a2 := lines[0]["identity"], lines[1]["identity"], lines[2]["identity"]
	if a != a2 || a == b || len(a) != 16 {
		t.Errorf("identities %q %q %q: want 16 hex digits, the same for the same caller", a, b, a2)
	}
	raw := w.buf.String()
	if strings.Contains(raw, "alice") || strings.Contains(raw, "bob") {
		t.Errorf("clear identity in the log: %s", raw)
	}

	// The same key hashes the same in another process.
	key := []byte("k")
	w1, w2 := &lockedBuffer{}, &lockedBuffer{}
	for _, w := range []*lockedBuffer{w1, w2} {
		l := newLog(t, w, accesslog.Options{Key: key, Identity: accesslog.Hashed})
		l.Log(accesslog.Entry{Outcome: accesslog.Denied, Identity: "user:alice"})
		l.Close()
	}
	if x, y := w1.lines(t)[0]["identity"], w2.lines(t)[0]["identity"]; x != y {
		t.Errorf("same key, hashes %q and %q", x, y)
	}
}

// RefusalsOnly leaves allowed decisions out; identity none leaves the
// field out; Sample keeps a fraction.
func TestFilters(t *testing.T) {
	w := &lockedBuffer{}
	l := newLog(t, w, accesslog.Options{RefusalsOnly: true, Identity: accesslog.None, MaxPerSecond: 1 << 20})
	l.Log(accesslog.Entry{Outcome: accesslog.Allowed, Identity: "a"})
	l.Log(accesslog.Entry{Outcome: accesslog.Denied, Identity: "a"})
	l.Close()
	lines := w.lines(t)
	if len(lines) != 1 || lines[0]["outcome"] != "denied" || lines[0]["identity"] != "" {
		t.Errorf("lines %v, want the one denial without identity", lines)
	}

	w = &lockedBuffer{}
	l = newLog(t, w, accesslog.Options{Sample: 0.1, MaxPerSecond: 1 << 20})
	for range 500 { // at most 500 lines: the buffer (1024) never fills
		l.Log(accesslog.Entry{Outcome: accesslog.Denied})
	}
	l.Close()
	if n := len(w.lines(t)); n == 0 || n >= 250 {
		t.Errorf("sample 0.1 of 500 wrote %d lines", n)
	}
}

func TestBadOptions(t *testing.T) {
	for _, o := range []accesslog.Options{{}, {Writer: &lockedBuffer{}, Sample: 2}, {Writer: &lockedBuffer{}, MaxPerSecond: -1}} {
		if _, err := accesslog.New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
	if _, err := accesslog.ParseIdentity("md5"); err == nil {
		t.Error("ParseIdentity(md5): no error")
	}
	// One spelling for every record; "" is the record's own default:
	// hashed for the access log, none for the spans.
	for _, c := range []struct {
		s     string
		empty accesslog.Identity
		want  accesslog.Identity
	}{{"", accesslog.Hashed, accesslog.Hashed}, {"", accesslog.None, accesslog.None}, {"hashed", accesslog.None, accesslog.Hashed}, {"clear", accesslog.None, accesslog.Clear}, {"none", accesslog.Hashed, accesslog.None}} {
		if got, err := accesslog.ParseIdentityOr(c.s, c.empty); err != nil || got != c.want {
			t.Errorf("ParseIdentityOr(%q, %v) = %v, %v; want %v", c.s, c.empty, got, err, c.want)
		}
	}
	if _, err := accesslog.ParseIdentityOr("plain", accesslog.None); err == nil {
		t.Error("ParseIdentityOr(plain): no error")
	}
}

// A nil Log (the access log off) does nothing and does not allocate.
func TestNilLog(t *testing.T) {
	var l *accesslog.Log
	if n := testing.AllocsPerRun(100, func() {
		if l.Wants(accesslog.Denied) {
			l.Log(accesslog.Entry{Outcome: accesslog.Denied})
		}
	}); n != 0 {
		t.Errorf("%v allocs", n)
	}
	if l.Dropped() != 0 || l.Close() != nil {
		t.Error("nil Log")
	}
}

func BenchmarkLog(b *testing.B) {
	l, _ := accesslog.New(accesslog.Options{Writer: discard{}, MaxPerSecond: 1 << 30, Identity: accesslog.Hashed})
	defer l.Close()
	e := accesslog.Entry{Rule: "api", Outcome: accesslog.Denied, Layer: "rate_limit", Identity: "user:alice", Method: "GET", Path: "/v1/items"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Log(e)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestLoadKey: a configured key hashes a caller the same in two logs (two
// processes), a drawn one differently; a short or missing key is refused.
func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("  0123456789abcdef0123  \nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := accesslog.LoadKey(file)
	if err != nil || string(key) != "0123456789abcdef0123" {
		t.Fatalf("LoadKey: %q, %v", key, err)
	}
	hash := func(key []byte) string {
		h, err := accesslog.NewHasher(key)
		if err != nil {
			t.Fatal(err)
		}
		return string(h.Append(nil, "user=alice"))
	}
	if a, b := hash(key), hash([]byte("0123456789abcdef0123")); a != b || len(a) != accesslog.HashLen {
		t.Errorf("one key, two hashers: %q and %q", a, b)
	}
	if hash(nil) == hash(nil) {
		t.Error("two drawn keys hash alike")
	}
	if k, err := accesslog.LoadKey(""); k != nil || err != nil {
		t.Errorf(`LoadKey(""): %q, %v; want a drawn key (nil)`, k, err)
	}
	os.WriteFile(file, []byte("short\n"), 0o600)
	for _, f := range []string{file, filepath.Join(dir, "missing")} {
		if _, err := accesslog.LoadKey(f); err == nil {
			t.Errorf("%s: no error", f)
		}
	}
}
