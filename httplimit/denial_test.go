package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/ratelimit/header"
)

func mustDenial(t *testing.T, status int, body, ct string) *httplimit.Denial {
	t.Helper()
	d, err := httplimit.NewDenial(status, body, ct)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDenialDefaultIsTodaysAnswer: with no denial, or an empty one, a
// rate limit refusal is byte for byte the problem+json answer it always
// was.
func TestDenialDefaultIsTodaysAnswer(t *testing.T) {
	const want = `{"type":"about:blank","title":"Too Many Requests","status":429,"detail":"rate limit \"per-ip\" exceeded","policy":"per-ip"}` + "\n"
	for _, d := range []*httplimit.Denial{nil, mustDenial(t, 0, "", "")} {
		h := (&httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
			Descriptors: identityDescriptors(), Denial: d}).Handler(ok)
		for range 3 {
			do(h, "192.0.2.1:1")
		}
		w := do(h, "192.0.2.1:1")
		if w.Code != 429 || w.Body.String() != want {
			t.Errorf("denial %v: %d %q, want 429 %q", d, w.Code, w.Body, want)
		}
		hd := w.Header()
		if hd.Get("Content-Type") != "application/problem+json" || hd.Get("Retry-After") != "20" ||
			hd.Get("Content-Length") != strconv.Itoa(len(want)) || hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("RateLimit") == "" {
			t.Errorf("denial %v: headers %v", d, hd)
		}
	}
}

// TestDenialCustomAnswer: a rate limit and an in-flight cap with a denial
// answer its status, body and content type, placeholders filled with the
// server's values, Retry-After and RateLimit headers still sent; the
// observer sees the status sent.
func TestDenialCustomAnswer(t *testing.T) {
	d := mustDenial(t, 503, `{"error":"slow down","policy":"{policy}","retry":{retry_after},"x":{other}}`, "application/json")
	rec := newRefusals()
	rate := (&httplimit.Middleware{Store: newStore(t), Rules: mustRules(t, testRules), Domain: "test",
		Descriptors: identityDescriptors(), Denial: d, Refusals: rec.rs}).Handler(ok)
	for range 3 {
		do(rate, "192.0.2.1:1")
	}
	ifStore := inflight.NewMemory(inflight.MemoryOptions{})
	defer ifStore.Close()
	if _, dec, err := ifStore.Acquire(t.Context(), inflight.Request{Key: "inflight:ip:192.0.2.1", Cap: 1, Weight: 1}); err != nil || !dec.Allowed {
		t.Fatal(dec, err)
	}
	inFlight := (&httplimit.InFlight{Store: ifStore, Max: 1, RetryAfter: 2 * time.Second, Denial: d, Refusals: rec.rs}).Handler(ok)
	for _, tc := range []struct {
		name, body, retry string
		h                 http.Handler
	}{
		{"rate limit", `{"error":"slow down","policy":"per-ip","retry":20,"x":{other}}`, "20", rate},
		{"in flight", `{"error":"slow down","policy":"in-flight","retry":2,"x":{other}}`, "2", inFlight},
	} {
		w := do(tc.h, "192.0.2.1:1")
		hd := w.Header()
		if w.Code != 503 || w.Body.String() != tc.body || hd.Get("Content-Type") != "application/json" ||
			hd.Get("Retry-After") != tc.retry || hd.Get("Content-Length") != strconv.Itoa(len(tc.body)) || hd.Get("RateLimit") == "" {
			t.Errorf("%s: %d %q %v, want 503 %q with Retry-After %s", tc.name, w.Code, w.Body, hd, tc.body, tc.retry)
		}
		if got := rec.take(); len(got) != 1 || got[0].Status != 503 || got[0].Cause != httplimit.OverLimit {
			t.Errorf("%s: observed %+v, want one over_limit refusal with status 503", tc.name, got)
		}
	}
}

// TestDenialScope: a denial changes neither a store that cannot decide
// nor the shedders' and adaptive limit's refusals; a status alone keeps
// the problem body with that status; Opaque sends no Retry-After and
// fills no policy.
func TestDenialScope(t *testing.T) {
	d := mustDenial(t, 403, "no: {policy} {retry_after}", "")
	for _, tc := range []struct {
		name   string
		mode   header.Mode
		rf     httplimit.Refusal
		status int
		ct     string
		body   string // a prefix of the body
		retry  string
	}{
		{"unavailable", header.IETF, httplimit.Refusal{Layer: httplimit.LayerRateLimit, Cause: httplimit.Unavailable, Status: 503, Policy: "p", RetryAfter: time.Second, Denial: d},
			503, "application/problem+json", `{"type":"about:blank","title":"Service Unavailable"`, "1"},
		{"shed", header.IETF, httplimit.Refusal{Layer: httplimit.LayerShed, Status: 503, Policy: "shed", RetryAfter: time.Second, Denial: d},
			503, "application/problem+json", `{"type":"about:blank","title":"Service Unavailable"`, "1"},
		{"adaptive", header.IETF, httplimit.Refusal{Layer: httplimit.LayerAdaptive, Status: 503, Policy: "adaptive", RetryAfter: time.Second, Denial: d},
			503, "application/problem+json", `{"type":"about:blank"`, "1"},
		{"status only", header.IETF, httplimit.Refusal{Layer: httplimit.LayerRateLimit, Status: 429, Policy: "p", RetryAfter: time.Second, Denial: mustDenial(t, 503, "", "")},
			503, "application/problem+json", `{"type":"about:blank","title":"Service Unavailable","status":503`, "1"},
		{"text", header.IETF, httplimit.Refusal{Layer: httplimit.LayerRateLimit, Status: 429, Policy: "p", RetryAfter: 1500 * time.Millisecond, Denial: d},
			403, httplimit.DefaultDenialContentType, "no: p 2", "2"},
		{"opaque", header.Off, httplimit.Refusal{Layer: httplimit.LayerRateLimit, Status: 429, Policy: "p", RetryAfter: time.Second, Denial: d},
			403, httplimit.DefaultDenialContentType, "no:  0", ""},
	} {
		w := httptest.NewRecorder()
		(*httplimit.Refusals)(nil).Write(w, tc.mode, tc.rf)
		if w.Code != tc.status || w.Header().Get("Content-Type") != tc.ct || !strings.HasPrefix(w.Body.String(), tc.body) || w.Header().Get("Retry-After") != tc.retry {
			t.Errorf("%s: %d %s %q Retry-After %q, want %d %s %q... Retry-After %q", tc.name, w.Code, w.Header().Get("Content-Type"), w.Body,
				w.Header().Get("Retry-After"), tc.status, tc.ct, tc.body, tc.retry)
		}
	}
}

// TestDenialEscapesPolicy: {policy} is escaped for a JSON or HTML body.
func TestDenialEscapesPolicy(t *testing.T) {
	for _, tc := range []struct{ ct, want string }{
		{"application/json", `"a\"b\u003cc\\"`},
		{"application/problem+json; charset=utf-8", `"a\"b\u003cc\\"`},
		{"text/html", `"a&#34;b&lt;c\"`},
		{"text/plain", `"a"b<c\"`},
	} {
		w := httptest.NewRecorder()
		(*httplimit.Refusals)(nil).Write(w, header.IETF, httplimit.Refusal{Layer: httplimit.LayerRateLimit, Status: 429, Policy: `a"b<c\`,
			Denial: mustDenial(t, 0, `"{policy}"`, tc.ct)})
		if w.Body.String() != tc.want || w.Code != 429 {
			t.Errorf("%s: %d %s, want 429 %s", tc.ct, w.Code, w.Body, tc.want)
		}
	}
}

// TestNewDenialRejects: bad statuses, bodies and content types.
func TestNewDenialRejects(t *testing.T) {
	for _, tc := range []struct {
		status   int
		body, ct string
		want     string
	}{
		{399, "", "", "status 399"},
		{600, "", "", "status 600"},
		{200, "x", "", "status 200"},
		{429, strings.Repeat("x", httplimit.MaxDenialBody+1), "", "at most 4096"},
		{429, "\xff", "", "UTF-8"},
		{429, "x", "json", "media type"},
		{429, "x", "text/plain\r\nX-Injected: 1", "media type"},
		{429, "", "application/json", "without a body"},
	} {
		if _, err := httplimit.NewDenial(tc.status, tc.body, tc.ct); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewDenial(%d, %.10q, %q) = %v, want an error with %q", tc.status, tc.body, tc.ct, err, tc.want)
		}
	}
}
