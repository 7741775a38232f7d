package abuse

// The harness: build cmd/sluice once, run it as a subprocess with its log
// captured, find the addresses it listens on, scrape its metrics, read its
// memory, and a counting upstream for the gateway to proxy to.

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// build is the sluice binary of this run, built on first use.
var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// sluiceBinary returns the path of cmd/sluice built from this tree. The
// build runs once per test run (go test puts the go command on PATH).
func sluiceBinary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "sluice-abuse-")
		if build.err != nil {
			return
		}
		bin := filepath.Join(build.dir, "sluice")
		cmd := exec.Command("go", "build", "-o", bin, "github.com/sluicehq/sluice/cmd/sluice")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ./cmd/sluice: %v\n%s", err, out)
			return
		}
		build.bin = bin
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.bin
}

// startTimeout bounds how long a process may take to log its addresses.
const startTimeout = 30 * time.Second

// logLine is one line a process wrote to stderr or stdout.
type logLine struct {
	at   time.Time
	text string
}

// lineLog collects a process's output line by line.
type lineLog struct {
	mu      sync.Mutex
	lines   []logLine
	partial []byte
	changed chan struct{} // closed and replaced at each new line
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	added := false
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, logLine{time.Now(), string(l.partial[:i])})
		l.partial = l.partial[i+1:]
		added = true
	}
	if added {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(p), nil
}

// snapshot returns the lines so far and a channel closed at the next one.
func (l *lineLog) snapshot() ([]logLine, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines), l.changed
}

// proc is a sluice process.
type proc struct {
	t       testing.TB
	name    string
	cmd     *exec.Cmd
	log     *lineLog
	exited  chan struct{} // closed once reaped
	waitErr error
}

// startProc runs sluice with args and waits for a log line matching ready,
// whose submatches it returns. When the process exits first, it returns
// the process's output as the error; the caller decides (see
// skipIfUnknown).
func startProc(t testing.TB, name string, ready *regexp.Regexp, args ...string) (*proc, []string, error) {
	t.Helper()
	return startProcAs(t, name, ready, "", args...)
}

// startProcAs is startProc with the process's argv[0] set to argv0 (when
// not ""): /bin/ratelimit, say, as a Deployment's command names it.
func startProcAs(t testing.TB, name string, ready *regexp.Regexp, argv0 string, args ...string) (*proc, []string, error) {
	t.Helper()
	p := &proc{t: t, name: name, log: newLineLog(), exited: make(chan struct{})}
	p.cmd = exec.Command(sluiceBinary(t), args...)
	if argv0 != "" {
		p.cmd.Args[0] = argv0
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	setDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			lines, _ := p.log.snapshot()
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			var b strings.Builder
			for _, l := range lines {
				b.WriteString(l.text + "\n")
			}
			t.Logf("%s (pid %d), last lines of its log:\n%s", name, p.cmd.Process.Pid, b.String())
		}
	})
	deadline := time.After(startTimeout)
	seen := 0
	for {
		lines, changed := p.log.snapshot()
		for _, l := range lines[seen:] {
			if m := ready.FindStringSubmatch(l.text); m != nil {
				return p, m, nil
			}
		}
		seen = len(lines)
		select {
		case <-changed:
		case <-p.exited:
			// cmd.Wait copied the pipes to the end before it returned.
			return nil, nil, fmt.Errorf("%s exited before it was ready (%v):\n%s", name, p.waitErr, p.output())
		case <-deadline:
			return nil, nil, fmt.Errorf("%s did not log %q within %v:\n%s", name, ready, startTimeout, p.output())
		}
	}
}

// output returns everything the process wrote.
func (p *proc) output() string {
	lines, _ := p.log.snapshot()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.text + "\n")
	}
	p.log.mu.Lock()
	b.Write(p.log.partial)
	p.log.mu.Unlock()
	return b.String()
}

// stop ends the process: SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// lines returns the log lines written since from.
func (p *proc) lines(from time.Time) []string {
	all, _ := p.log.snapshot()
	var out []string
	for _, l := range all {
		if !l.at.Before(from) {
			out = append(out, l.text)
		}
	}
	return out
}

// alive fails t when the process has exited.
func (p *proc) alive(t testing.TB) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("%s exited (%v)", p.name, p.waitErr)
	default:
	}
}

// rss returns the process's resident set size in bytes (VmRSS).
func (p *proc) rss(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc/<pid>/status to read memory from: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || len(f) != 2 || f[1] != "kB" {
				t.Fatalf("VmRSS line %q", line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", p.cmd.Process.Pid)
	return 0
}

// gatewayProc is a `sluice serve` process.
type gatewayProc struct {
	*proc
	url   string // http://127.0.0.1:port of the public listener
	admin string // http://… of the admin listener
	cfg   string // the config file
}

var serveReady = regexp.MustCompile(`msg="sluice serve: listening" addr=(\S+) admin=(\S+)`)

// startServe runs `sluice serve --config cfg` on free loopback ports (the
// kernel's, with :0) with extra flags.
func startServe(t testing.TB, cfg string, flags ...string) *gatewayProc {
	t.Helper()
	g, err := tryServe(t, cfg, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// tryServe is startServe returning the error, for a test that probes
// whether the binary knows a setting yet.
func tryServe(t testing.TB, cfg string, flags ...string) (*gatewayProc, error) {
	t.Helper()
	args := append([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, flags...)
	p, m, err := startProc(t, "sluice serve", serveReady, args...)
	if err != nil {
		return nil, err
	}
	return &gatewayProc{proc: p, url: "http://" + m[1], admin: "http://" + m[2], cfg: cfg}, nil
}

// rlsProc is a `sluice rls` process.
type rlsProc struct {
	*proc
	grpc string // host:port
	http string // http://host:port
}

var rlsReady = regexp.MustCompile(`msg="sluice rls: listening" grpc=(\S+) .*http=(\S+)`)

// startRLS runs `sluice rls --config-dir dir` on free loopback ports with
// extra flags.
func startRLS(t testing.TB, dir string, flags ...string) *rlsProc {
	t.Helper()
	r, err := tryRLS(t, dir, flags...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tryRLS(t testing.TB, dir string, flags ...string) (*rlsProc, error) {
	t.Helper()
	args := append([]string{"rls", "--config-dir", dir, "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, flags...)
	p, m, err := startProc(t, "sluice rls", rlsReady, args...)
	if err != nil {
		return nil, err
	}
	return &rlsProc{proc: p, grpc: m[1], http: "http://" + m[2]}, nil
}

// skipIfUnknown skips t when err says the binary does not know a setting
// or flag yet (its config parser's "unknown field", or the flag package's
// "flag provided but not defined"), naming what is missing; any other
// error fails t.
func skipIfUnknown(t testing.TB, err error, what string) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	for _, s := range []string{"unknown field", "flag provided but not defined"} {
		if strings.Contains(msg, s) {
			t.Skipf("not fixed yet: %s (the binary refuses it: %s)", what, firstLine(msg, s))
		}
	}
	t.Fatal(err)
}

// firstLine returns the first line of s containing sub.
func firstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return s
}

// writeFile writes content to dir/name and returns the path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// replaceFile replaces dir/name atomically (a rename), as an editor or a
// deployment tool does, so that a watcher never reads half a file.
func replaceFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// keyLine is a line of an API keys file: the key's SHA-256, user, tier.
func keyLine(key, user, tier string) string {
	sum := sha256.Sum256([]byte(key))
	return strings.TrimSpace(hex.EncodeToString(sum[:])+" "+user+" "+tier) + "\n"
}

// client returns an HTTP client of its own (its own connections) that
// does not follow redirects: a test sees every answer the gateway gives.
func client(t testing.TB) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// do sends a request and returns the status, headers and body.
func do(t testing.TB, c *http.Client, method, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	code, h, body, err := tryDo(c, method, url, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return code, h, body
}

func tryDo(c *http.Client, method, url string, hdr ...string) (int, http.Header, string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, "", err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header[hdr[i]] = append(req.Header[hdr[i]], hdr[i+1])
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, res.Header, string(b), err
}

// rawRequest writes req (the request line and headers as given, "\r\n"
// separated, ending in a blank line) on a new connection to addr
// (host:port) and returns the status code of the answer. It is for
// spellings net/http's client would clean or refuse to send.
func rawRequest(t testing.TB, addr, req string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// hostPort returns the host:port of an http:// URL.
func hostPort(url string) string { return strings.TrimPrefix(url, "http://") }

// metrics is one scrape of a Prometheus text exposition: each series
// ("name{labels}" as exposed) with its value.
type metrics struct {
	series map[string]float64
	size   int // bytes of the exposition
}

// scrape reads url's /metrics.
func scrape(t testing.TB, base string) metrics {
	t.Helper()
	m, err := tryScrape(base)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tryScrape(base string) (metrics, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Get(base + "/metrics")
	if err != nil {
		return metrics{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return metrics{}, err
	}
	if res.StatusCode != http.StatusOK {
		return metrics{}, fmt.Errorf("GET %s/metrics: %s", base, res.Status)
	}
	m := metrics{series: map[string]float64{}, size: len(b)}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return metrics{}, fmt.Errorf("metric line %q: %v", line, err)
		}
		m.series[line[:i]] = v
	}
	return m, nil
}

// name returns a series' metric name.
func seriesName(s string) string {
	if i := strings.IndexByte(s, '{'); i >= 0 {
		return s[:i]
	}
	return s
}

// get returns the sum of the series of metric name whose labels include
// every `k="v"` of labels (given as "k", "v", …), and whether any exists.
func (m metrics) get(name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for s, v := range m.series {
		if seriesName(s) != name || !hasLabels(s, labels) {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// value is get for a series that must exist.
func (m metrics) value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	v, ok := m.get(name, labels...)
	if !ok {
		t.Fatalf("no metric %s%v in /metrics", name, labels)
	}
	return v
}

// count returns how many series of metric name have labels.
func (m metrics) count(name string, labels ...string) int {
	n := 0
	for s := range m.series {
		if seriesName(s) == name && hasLabels(s, labels) {
			n++
		}
	}
	return n
}

// names returns the metric names that contain sub.
func (m metrics) names(sub string) []string {
	var out []string
	for s := range m.series {
		if n := seriesName(s); strings.Contains(n, sub) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func hasLabels(series string, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		if !strings.Contains(series, labels[i]+`="`+labels[i+1]+`"`) {
			return false
		}
	}
	return true
}

// eventually retries f every 20 ms until it returns nil or timeout
// passes, then fails t with f's last error.
func eventually(t testing.TB, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// upstream is an HTTP server standing for the API behind the gateway: it
// answers 200 and records what reached it.
type upstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

// seenRequest is what the upstream received.
type seenRequest struct {
	Method  string
	Path    string // URL.Path, decoded
	RawPath string // as written on the wire (RequestURI)
	Header  http.Header
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{r.Method, r.URL.Path, r.RequestURI, r.Header.Clone()})
		u.mu.Unlock()
		w.Write([]byte("ok\n"))
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// requests returns what reached the upstream so far.
func (u *upstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// parallel runs f(i) for i in [0, n) on workers goroutines and returns
// the first error.
func parallel(n, workers int, f func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// mib formats bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// rlsRequest is a RateLimitRequest in protojson: one descriptor per entry
// list.
func rlsRequest(domain string, hits int, descriptors ...[][2]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"domain":%q,"hits_addend":%d,"descriptors":[`, domain, hits)
	for i, d := range descriptors {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"entries":[`)
		for j, e := range d {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"key":%q,"value":%q}`, e[0], e[1])
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return b.String()
}

// tryDecide posts a request to the RLS's /json endpoint and returns the
// status (200 OK, 429 OVER_LIMIT, 500 the store failed) and body.
func (r *rlsProc) tryDecide(c *http.Client, domain string, hits int, descriptors ...[][2]string) (int, string, error) {
	res, err := c.Post(r.http+"/json", "application/json", strings.NewReader(rlsRequest(domain, hits, descriptors...)))
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

// decide is tryDecide failing t on a transport error or an unexpected
// status.
func (r *rlsProc) decide(t testing.TB, domain string, hits int, descriptors ...[][2]string) int {
	t.Helper()
	code, body, err := r.tryDecide(http.DefaultClient, domain, hits, descriptors...)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK && code != http.StatusTooManyRequests {
		t.Fatalf("POST /json: %d %s", code, body)
	}
	return code
}
