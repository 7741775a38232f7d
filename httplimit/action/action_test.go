package action_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rules"
)

// pseudoLimited serves h behind a middleware whose only descriptor is
// a, limited to 1 request a second when the entry is key=value. The
// store's clock stands still, so nothing refills during the test.
func pseudoLimited(t *testing.T, tls bool, a action.Action, key, value string) *httptest.Server {
	t.Helper()
	src := fmt.Sprintf(`
domain: pseudo
descriptors:
  - key: %q
    value: %q
    rate_limit: {name: one, algorithm: token_bucket, unit: second, requests_per_unit: 1}
`, key, value)
	c, err := rules.Parse("pseudo.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.NewSet(c)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Options{Now: func() time.Time { return now }, SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	mw := &httplimit.Middleware{Store: store, Rules: set, Domain: "pseudo",
		Descriptors: []action.Descriptor{{Actions: []action.Action{a}}}}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	var srv *httptest.Server
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv
}

// TestPseudoHeaders checks that a 1 request a second rule on each
// pseudo-header, and on Host, admits the first request and denies the
// second through a real server, with request_headers and with
// header_value_match. Go's server never shows a handler these as headers,
// so a plain header lookup admitted everything. The second request spells
// the same host and path differently, which must not escape the limit.
func TestPseudoHeaders(t *testing.T) {
	t.Parallel()
	type req struct{ method, host, target string }
	cases := []struct {
		header string
		tls    bool
		value  string // what the header reads as
		first  req
		second req
	}{
		{":authority", false, "api.example.test", req{"GET", "api.example.test", "/"}, req{"GET", "API.Example.TEST.", "/"}},
		{"host", false, "api.example.test:8443", req{"GET", "api.example.test:8443", "/x"}, req{"GET", "Api.Example.Test.:8443", "/y"}},
		{"Host", false, "api.example.test", req{"GET", "api.example.test", "/"}, req{"GET", "api.example.test", "/"}},
		{":path", false, "/v1/items?page=2", req{"GET", "a.test", "/v1/items?page=2"}, req{"GET", "a.test", "/v1/%69tems?page=2"}},
		{":method", false, "PATCH", req{"PATCH", "a.test", "/"}, req{"PATCH", "b.test", "/other"}},
		{":scheme", false, "http", req{"GET", "a.test", "/"}, req{"GET", "b.test", "/"}},
		{":scheme", true, "https", req{"GET", "a.test", "/"}, req{"GET", "b.test", "/"}},
		{":Authority", false, "api.example.test", req{"GET", "api.example.test", "/"}, req{"GET", "api.example.test", "/"}},
	}
	for _, c := range cases {
		actions := map[string]action.Action{
			"request_headers": action.RequestHeaders{HeaderName: c.header, DescriptorKey: "k"},
			"header_value_match": action.HeaderValueMatch{DescriptorKey: "k", DescriptorValue: c.value,
				Headers: []action.HeaderMatcher{{Name: c.header, Exact: c.value}}},
		}
		for kind, a := range actions {
			t.Run(fmt.Sprintf("%s/%s/tls=%v", kind, c.header, c.tls), func(t *testing.T) {
				t.Parallel()
				srv := pseudoLimited(t, c.tls, a, "k", c.value)
				var got []int
				for _, rq := range []req{c.first, c.second} {
					r, err := http.NewRequest(rq.method, srv.URL+rq.target, nil)
					if err != nil {
						t.Fatal(err)
					}
					r.Host = rq.host
					res, err := srv.Client().Do(r)
					if err != nil {
						t.Fatal(err)
					}
					res.Body.Close()
					got = append(got, res.StatusCode)
				}
				if fmt.Sprint(got) != "[200 429]" {
					t.Errorf("statuses = %v, want [200 429] (%s read as %q)", got, c.header, c.value)
				}
			})
		}
	}
}

func TestHeaderValue(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("DELETE", "https://Shop.Example.:8443/a%2fb/%7euser?q=1&r", nil)
	r.Header.Add("X-Tenant", "a")
	r.Header.Add("X-Tenant", "b")
	r.Header[":protocol"] = []string{"websocket"}
	plain := httptest.NewRequest("GET", "http://[2001:DB8::1]/", nil)
	for _, c := range []struct {
		r      *http.Request
		name   string
		want   string
		wantOK bool
	}{
		{r, ":authority", "shop.example:8443", true},
		{r, "HOST", "shop.example:8443", true},
		{r, ":path", "/a/b/~user?q=1&r", true},
		{r, ":method", "DELETE", true},
		{r, ":scheme", "https", true},
		{r, ":protocol", "websocket", true},
		{r, "x-tenant", "a,b", true},
		{r, "X-Missing", "", false},
		{r, ":status", "", false},
		{r, ":foo", "", false},
		{plain, ":authority", "[2001:db8::1]", true},
		{plain, ":scheme", "http", true},
		{plain, ":path", "/", true},
		{plain, ":protocol", "", false},
	} {
		got, ok := action.HeaderValue(c.r, c.name)
		if got != c.want || ok != c.wantOK {
			t.Errorf("HeaderValue(%s %s, %q) = %q, %v, want %q, %v", c.r.Method, c.r.URL, c.name, got, ok, c.want, c.wantOK)
		}
	}
	// request_headers takes the first of several values.
	e, ok := action.RequestHeaders{HeaderName: "X-Tenant", DescriptorKey: "t"}.Entry(r, identity.Identity{})
	if !ok || e.Value != "a" {
		t.Errorf("RequestHeaders X-Tenant = %+v, %v, want a", e, ok)
	}
	// An unknown pseudo-header is absent: the descriptor is dropped.
	if _, ok := (action.RequestHeaders{HeaderName: ":status", DescriptorKey: "s"}).Entry(r, identity.Identity{}); ok {
		t.Error("RequestHeaders :status produced an entry")
	}
	// A CONNECT to host:port has no :path.
	c := httptest.NewRequest("CONNECT", "http://example.test/", nil)
	c.URL.Path = ""
	if v, ok := action.HeaderValue(c, ":path"); ok {
		t.Errorf("CONNECT :path = %q, want absent", v)
	}
}

func TestCheckHeader(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		warn     string // a substring of the warning; "" for none
		errorful bool
	}{
		{"X-Api-Key", "", false},
		{"host", "", false},
		{"Host", "", false},
		{":authority", "", false},
		{":PATH", "", false},
		{":method", "", false},
		{":scheme", "", false},
		{":protocol", "", false},
		{":status", "", true},
		{":host", "", true},
		{":", "", true},
		{"", "", true},
		{"x api key", "", true},
		{"x-ä", "", true},
		{"transfer-encoding", "removes Transfer-Encoding", false},
		{"Trailer", "removes Trailer", false},
		{"connection", "Connection is hop-by-hop", false},
		{"Keep-Alive", "hop-by-hop", false},
		{"proxy-connection", "hop-by-hop", false},
		{"Upgrade", "hop-by-hop", false},
		{"te", "TE is hop-by-hop", false},
	} {
		warn, err := action.CheckHeader(c.name)
		if (err != nil) != c.errorful || (err != nil && !errors.Is(err, action.ErrHeaderName)) {
			t.Errorf("CheckHeader(%q) error = %v, want error: %v", c.name, err, c.errorful)
		}
		if (c.warn == "") != (warn == "") || !strings.Contains(warn, c.warn) {
			t.Errorf("CheckHeader(%q) warning = %q, want one with %q", c.name, warn, c.warn)
		}
	}
}

func TestCheckAction(t *testing.T) {
	t.Parallel()
	hvm := action.HeaderValueMatch{DescriptorValue: "v", Headers: []action.HeaderMatcher{
		{Name: ":method", Exact: "GET"}, {Name: "Connection", Exact: "close"}, {Name: ":foo"}}}
	warns, probs := action.Check(&hvm)
	if len(warns) != 1 || warns[0].Path != "header_value_match.headers[1].name" {
		t.Errorf("warnings = %v, want one at header_value_match.headers[1].name", warns)
	}
	if len(probs) != 1 || probs[0].Path != "header_value_match.headers[2].name" || !strings.Contains(probs[0].Msg, `unknown pseudo-header ":foo"`) {
		t.Errorf("problems = %v, want the unknown pseudo-header at header_value_match.headers[2].name", probs)
	}
	warns, probs = action.Check(action.RequestHeaders{HeaderName: "Transfer-Encoding", DescriptorKey: "te"})
	if len(warns) != 1 || warns[0].Path != "request_headers.header_name" || len(probs) != 0 {
		t.Errorf("request_headers Transfer-Encoding: warnings %v problems %v", warns, probs)
	}
	if w, p := action.Check(action.GenericKey{DescriptorValue: "x"}); w != nil || p != nil {
		t.Errorf("generic_key: warnings %v problems %v, want none", w, p)
	}
}
