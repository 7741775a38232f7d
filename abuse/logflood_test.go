package abuse

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// closedPort returns a loopback address nothing listens on: a port the
// kernel gave and that was closed at once.
func closedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// logVolume is the lines and bytes a process wrote from a time on,
// including the lines it writes when it stops.
func logVolume(p *proc, from time.Time) (lines int, bytes int) {
	for _, l := range p.lines(from) {
		lines++
		bytes += len(l) + 1
	}
	return lines, bytes
}

// Log-flood bounds, for floodRequests requests: at most floodMaxLines
// lines and floodMaxBytes bytes of log, whatever the requests' paths,
// headers and keys hold. Each kind of failure and rule (the upstream, a
// rule's name) gets a first line and one summary an interval (10 s), with
// at most 3 sample keys of at most 256 bytes each and the marker, and an
// error of at most 1 KiB.
const (
	floodRequests = 2000
	floodMaxLines = 12
	floodMaxBytes = 24 << 10
	floodPathLen  = 32 << 10
	// On a loaded machine a flood can outlast an interval or two: each
	// further interval may add one summary line (of at most 2 KiB: three
	// cut keys and a cut error) for each kind the test floods.
	floodKinds     = 2
	floodInterval  = 10 * time.Second
	floodLineBytes = 2 << 10
)

// floodBound is the bound on what a flood that began at start may write:
// floodMaxLines and floodMaxBytes, plus a summary of each kind for every
// whole interval past the first (the bound is per interval, not per run).
func floodBound(start time.Time) (lines, bytes int) {
	extra := floodKinds * int(time.Since(start)/floodInterval)
	return floodMaxLines + extra, floodMaxBytes + extra*floodLineBytes
}

// Attack: with the upstream down (or Redis), send requests whose path and
// headers are as long as the header limit lets them be. The gateway wrote
// "upstream failed" once per request with the whole path: 2000 requests
// with 32 KiB paths wrote 2000 lines and 62.8 MiB of log, an upstream
// outage turned into a logging outage (a full disk, a log pipeline
// throttled).
//
// Bound: upstream failures go through the bounded event log as store
// failures do (kind=upstream_error, counted per upstream, a line when
// they start and one summary an interval), and every client-controlled
// value in a line is cut to 256 bytes and marked ("...[cut]"): 2000
// requests with 32 KiB paths and 16 KiB keys, upstream and Redis down,
// write at most floodMaxLines lines and floodMaxBytes bytes, the lines
// the process writes when it stops included.
func TestLogFloodServe(t *testing.T) {
	t.Parallel()
	cfg := writeFile(t, t.TempDir(), "gateway.yaml", fmt.Sprintf(`
upstream: http://%s
store: redis://%s/0
on_store_error: allow
routes:
  - path: /
    rate_limits:
      - actions: [{request_headers: {header_name: X-Client, descriptor_key: client}}]
rules:
  domain: abuse
  descriptors:
    - key: client
      rate_limit: {name: per_client, algorithm: token_bucket, unit: hour, requests_per_unit: 1000000}
`, closedPort(t), closedPort(t)))
	g := startServe(t, cfg)
	c := client(t)
	start := time.Now()
	path := "/" + strings.Repeat("p", floodPathLen)
	key := strings.Repeat("k", 16<<10)
	err := parallel(floodRequests, 8, func(i int) error {
		code, _, _, err := tryDo(c, "GET", fmt.Sprintf("%s%s%d", g.url, path, i), "X-Client", fmt.Sprint(key, i))
		if err != nil {
			return err
		}
		if code != http.StatusBadGateway {
			return fmt.Errorf("request %d: %d, want 502 (the upstream is down)", i, code)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g.stop() // the summaries of what is left
	lines, bytes := logVolume(g.proc, start)
	maxLines, maxBytes := floodBound(start)
	t.Logf("%d requests with %d-byte paths: %d lines, %d bytes of log", floodRequests, len(path), lines, bytes)
	if lines > maxLines || bytes > maxBytes {
		t.Errorf("%d lines, %s of log for %d requests over %v; want at most %d lines and %d KiB", lines, mib(int64(bytes)), floodRequests, time.Since(start).Round(time.Second), maxLines, maxBytes>>10)
	}
	out := strings.Join(g.lines(start), "\n")
	for _, want := range []string{`msg="upstream failed"`, "kind=upstream_error", "...[cut]"} {
		if !strings.Contains(out, want) {
			t.Errorf("the log has no %q:\n%s", want, out)
		}
	}
}

// Attack: the same against the RLS: Redis down, requests whose
// descriptor values are long. Each store failure of a request is a
// per-request event.
//
// Bound: store failures go through the event log with their keys cut to
// 256 bytes and marked; 2000 requests with 4 KiB values write at most
// floodMaxLines lines and floodMaxBytes bytes, whether the failure policy
// answers them (allow) or the store's error does (error).
func TestLogFloodRLS(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"error", "allow"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			r := startRLS(t, redisRules(t, 1000000), "--store", "redis://"+closedPort(t), "--on-store-error", policy)
			c := client(t)
			start := time.Now()
			value := strings.Repeat("v", 4<<10)
			want := map[string]int{"error": http.StatusInternalServerError, "allow": http.StatusOK}[policy]
			err := parallel(floodRequests, 8, func(i int) error {
				code, body, err := r.tryDecide(c, "abuse", 1, [][2]string{{"k", fmt.Sprint(value, i)}})
				if err != nil {
					return err
				}
				if code != want {
					return fmt.Errorf("request %d: %d %s, want %d", i, code, body, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			r.stop()
			lines, bytes := logVolume(r.proc, start)
			maxLines, maxBytes := floodBound(start)
			t.Logf("%d requests with %d-byte values: %d lines, %d bytes of log", floodRequests, len(value), lines, bytes)
			if lines > maxLines || bytes > maxBytes {
				t.Errorf("%d lines, %s of log for %d requests over %v; want at most %d lines and %d KiB:\n%s", lines, mib(int64(bytes)), floodRequests, time.Since(start).Round(time.Second), maxLines, maxBytes>>10,
					strings.Join(r.lines(start), "\n"))
			}
			if out := strings.Join(r.lines(start), "\n"); policy == "error" && !strings.Contains(out, "...[cut]") {
				t.Errorf("the log has no cut key:\n%s", out)
			}
		})
	}
}

// Attack: open connections to a TLS listener and fail their handshakes
// (here: offer only TLS 1.0). net/http writes a line per failed handshake
// to the server's error log, which the gateway wrote to its log as it
// came: one line per connection, at the rate a client can connect.
//
// Bound: net/http's lines go through the event log (kind=server_error,
// per listener): 2000 failed handshakes write at most floodMaxLines
// lines and floodMaxBytes bytes.
func TestLogFloodTLSHandshakes(t *testing.T) {
	t.Parallel()
	cert, key := selfSigned(t)
	g := startServe(t, tlsGateway(t, cert, key))
	addr := strings.TrimPrefix(g.url, "http://")
	start := time.Now()
	err := parallel(floodRequests, 8, func(i int) error {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS10})
		if err == nil {
			c.Close()
			return fmt.Errorf("handshake %d: a TLS 1.0 handshake succeeded", i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g.stop()
	lines, bytes := logVolume(g.proc, start)
	maxLines, maxBytes := floodBound(start)
	t.Logf("%d failed handshakes: %d lines, %d bytes of log", floodRequests, lines, bytes)
	if lines > maxLines || bytes > maxBytes {
		t.Errorf("%d lines, %s of log for %d failed handshakes over %v; want at most %d lines and %d KiB", lines, mib(int64(bytes)), floodRequests, time.Since(start).Round(time.Second), maxLines, maxBytes>>10)
	}
	if out := strings.Join(g.lines(start), "\n"); !strings.Contains(out, "kind=server_error") || !strings.Contains(out, "TLS handshake error") {
		t.Errorf("the log does not say the handshakes failed:\n%s", out)
	}
}
