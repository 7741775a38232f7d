package action_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/identity"
	"github.com/sluicehq/sluice/rules"
)

// TestNewActions: each of masked_remote_address, query_parameters,
// query_parameter_value_match and cookie, request by request: the entry,
// and whether the descriptor survives.
func TestNewActions(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	re, err := action.CompileSafeRegex(`v[0-9]+`)
	if err != nil {
		t.Fatal(err)
	}
	v4 := identity.Identity{IP: netip.MustParseAddr("10.1.2.3")}
	v6 := identity.Identity{IP: netip.MustParseAddr("2001:db8:1:2:3:4:5:6")}
	type req struct {
		target string
		cookie string // Cookie header
		id     identity.Identity
	}
	cases := []struct {
		name   string
		action action.Action
		req    req
		want   rules.Entry
		ok     bool
	}{
		// masked_remote_address
		{"mask v4 /24", action.MaskedRemoteAddress{V4PrefixMaskLen: 24, V6PrefixMaskLen: 64}, req{id: v4},
			rules.Entry{Key: "masked_remote_address", Value: "10.1.2.0/24"}, true},
		{"mask v6 /64", action.MaskedRemoteAddress{V4PrefixMaskLen: 24, V6PrefixMaskLen: 64}, req{id: v6},
			rules.Entry{Key: "masked_remote_address", Value: "2001:db8:1:2::/64"}, true},
		{"mask v6 /48", action.MaskedRemoteAddress{V6PrefixMaskLen: 48}, req{id: v6},
			rules.Entry{Key: "masked_remote_address", Value: "2001:db8:1::/48"}, true},
		{"mask default v4", action.MaskedRemoteAddress{}, req{id: v4},
			rules.Entry{Key: "masked_remote_address", Value: "10.1.2.3/32"}, true},
		{"mask default v6", action.MaskedRemoteAddress{}, req{id: v6},
			rules.Entry{Key: "masked_remote_address", Value: "2001:db8:1:2:3:4:5:6/128"}, true},
		{"mask v4 /8", action.MaskedRemoteAddress{V4PrefixMaskLen: 8}, req{id: v4},
			rules.Entry{Key: "masked_remote_address", Value: "10.0.0.0/8"}, true},
		{"mask no IP", action.MaskedRemoteAddress{V4PrefixMaskLen: 24}, req{}, rules.Entry{}, false},

		// query_parameters
		{"query present", action.QueryParameters{QueryParameterName: "user", DescriptorKey: "u"}, req{target: "/a?x=1&user=bob&user=eve"},
			rules.Entry{Key: "u", Value: "bob"}, true},
		{"query decoded", action.QueryParameters{QueryParameterName: "q", DescriptorKey: "q"}, req{target: "/a?q=a%20b+c%2B%e9%41"},
			rules.Entry{Key: "q", Value: "a b+c+\xe9A"}, true},
		{"query partly malformed", action.QueryParameters{QueryParameterName: "q", DescriptorKey: "q"}, req{target: "/a?q=%xy%%20%2"},
			rules.Entry{Key: "q", Value: "%xy% %2"}, true},
		{"query name decoded", action.QueryParameters{QueryParameterName: "a b", DescriptorKey: "q"}, req{target: "/a?a%20b=1"},
			rules.Entry{Key: "q", Value: "1"}, true},
		{"query bad escape kept", action.QueryParameters{QueryParameterName: "user", DescriptorKey: "u"}, req{target: "/a?user=%zz&user=bob"},
			rules.Entry{Key: "u", Value: "%zz"}, true},
		{"query without value", action.QueryParameters{QueryParameterName: "debug", DescriptorKey: "d"}, req{target: "/a?debug"},
			rules.Entry{Key: "d", Value: ""}, true},
		{"query empty value", action.QueryParameters{QueryParameterName: "debug", DescriptorKey: "d"}, req{target: "/a?debug=&x"},
			rules.Entry{Key: "d", Value: ""}, true},
		{"query name case", action.QueryParameters{QueryParameterName: "user", DescriptorKey: "u"}, req{target: "/a?User=bob"}, rules.Entry{}, false},
		{"query absent", action.QueryParameters{QueryParameterName: "user", DescriptorKey: "u"}, req{target: "/a"}, rules.Entry{}, false},
		{"query absent skip", action.QueryParameters{QueryParameterName: "user", DescriptorKey: "u", SkipIfAbsent: true}, req{target: "/a?x=1"}, rules.Entry{}, true},

		// query_parameter_value_match
		{"qvm exact", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "fmt", Exact: "csv"}}},
			req{target: "/a?fmt=csv"}, rules.Entry{Key: "query_match", Value: "v"}, true},
		{"qvm exact first value only", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "fmt", Exact: "csv"}}},
			req{target: "/a?fmt=json&fmt=csv"}, rules.Entry{}, false},
		{"qvm all must match", action.QueryParameterValueMatch{DescriptorKey: "k", DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{
			{Name: "fmt", Prefix: "cs"}, {Name: "page", Suffix: "0"}, {Name: "q", Contains: "ee"}}},
			req{target: "/a?fmt=csv&page=100&q=deep"}, rules.Entry{Key: "k", Value: "v"}, true},
		{"qvm one fails", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{
			{Name: "fmt", Prefix: "cs"}, {Name: "page", Suffix: "0"}}},
			req{target: "/a?fmt=csv&page=101"}, rules.Entry{}, false},
		{"qvm expect_match false", action.QueryParameterValueMatch{DescriptorValue: "v", DontExpectMatch: true, QueryParameters: []action.QueryParameterMatcher{{Name: "fmt", Exact: "csv"}}},
			req{target: "/a?fmt=json"}, rules.Entry{Key: "query_match", Value: "v"}, true},
		{"qvm expect_match false, matches", action.QueryParameterValueMatch{DescriptorValue: "v", DontExpectMatch: true, QueryParameters: []action.QueryParameterMatcher{{Name: "fmt", Exact: "csv"}}},
			req{target: "/a?fmt=csv"}, rules.Entry{}, false},
		{"qvm regex whole value", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "api", SafeRegex: re}}},
			req{target: "/a?api=v12"}, rules.Entry{Key: "query_match", Value: "v"}, true},
		{"qvm regex partial is no match", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "api", SafeRegex: re}}},
			req{target: "/a?api=xv12"}, rules.Entry{}, false},
		{"qvm ignore case", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "fmt", Exact: "CSV", IgnoreCase: true}}},
			req{target: "/a?fmt=csv"}, rules.Entry{Key: "query_match", Value: "v"}, true},
		{"qvm present", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "debug", Present: &yes}}},
			req{target: "/a?debug"}, rules.Entry{Key: "query_match", Value: "v"}, true},
		{"qvm present, absent", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "debug", Present: &yes}}},
			req{target: "/a"}, rules.Entry{}, false},
		{"qvm present false, absent", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "debug", Present: &no}}},
			req{target: "/a"}, rules.Entry{Key: "query_match", Value: "v"}, true},
		{"qvm no condition, absent", action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "debug"}}},
			req{target: "/a?x"}, rules.Entry{}, false},

		// cookie
		{"cookie", action.Cookie{CookieName: "sid", DescriptorKey: "session"}, req{target: "/", cookie: "a=1; sid=abc; sid=def"},
			rules.Entry{Key: "session", Value: "abc"}, true},
		{"cookie quoted", action.Cookie{CookieName: "sid", DescriptorKey: "session"}, req{target: "/", cookie: `sid="abc"`},
			rules.Entry{Key: "session", Value: "abc"}, true},
		{"cookie empty value", action.Cookie{CookieName: "sid", DescriptorKey: "session"}, req{target: "/", cookie: "sid="},
			rules.Entry{Key: "session", Value: ""}, true},
		{"cookie absent", action.Cookie{CookieName: "sid", DescriptorKey: "session"}, req{target: "/", cookie: "other=1"}, rules.Entry{}, false},
		{"cookie absent skip", action.Cookie{CookieName: "sid", DescriptorKey: "session", SkipIfAbsent: true}, req{target: "/"}, rules.Entry{}, true},
		{"cookie name case", action.Cookie{CookieName: "sid", DescriptorKey: "session"}, req{target: "/", cookie: "SID=abc"}, rules.Entry{}, false},
	}
	for _, c := range cases {
		target := c.req.target
		if target == "" {
			target = "/"
		}
		r := httptest.NewRequest("GET", target, nil)
		if c.req.cookie != "" {
			r.Header.Set("Cookie", c.req.cookie)
		}
		got, ok := c.action.Entry(r, c.req.id)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: Entry = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestNewActionsBehindProxy: masked_remote_address masks the client's
// address that the resolver found behind a trusted proxy, not the
// proxy's.
func TestNewActionsBehindProxy(t *testing.T) {
	t.Parallel()
	res, err := identity.NewResolver(identity.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	r.Header.Set("X-Forwarded-For", "203.0.113.77")
	id, err := res.Resolve(r)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := action.MaskedRemoteAddress{V4PrefixMaskLen: 24}.Entry(r, id)
	if want := (rules.Entry{Key: "masked_remote_address", Value: "203.0.113.0/24"}); got != want || !ok {
		t.Errorf("Entry = %+v, %v; want %+v", got, ok, want)
	}
}

// TestCookieLimitsPerSession: a cookie action through a real server, 1
// request a second per session: the same session again is denied, also
// when other cookies come first, and another session (behind the same
// address) gets its own counter.
func TestCookieLimitsPerSession(t *testing.T) {
	t.Parallel()
	srv := pseudoLimited(t, false, action.Cookie{CookieName: "sid", DescriptorKey: "session"}, "session", "abc")
	get := func(cookie string) int {
		req, _ := http.NewRequest("GET", srv.URL+"/", nil)
		req.Header.Set("Cookie", cookie)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := get("sid=abc"); s != http.StatusOK {
		t.Fatalf("first = %d", s)
	}
	if s := get("x=1; sid=abc"); s != http.StatusTooManyRequests {
		t.Errorf("same session again = %d, want 429", s)
	}
	if s := get("sid=def"); s != http.StatusOK {
		t.Errorf("another session = %d, want 200", s)
	}
}

func TestCheckNewActions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		action action.Action
		path   string // "" for no problem
		msg    string
	}{
		{action.Cookie{CookieName: "sid", DescriptorKey: "s"}, "", ""},
		{&action.Cookie{CookieName: "bad name", DescriptorKey: "s"}, "cookie.cookie_name", "not a cookie name"},
		{action.Cookie{DescriptorKey: "s"}, "cookie.cookie_name", "empty cookie name"},
		{action.MaskedRemoteAddress{V4PrefixMaskLen: 24, V6PrefixMaskLen: 56}, "", ""},
		{action.MaskedRemoteAddress{V4PrefixMaskLen: 33}, "masked_remote_address.v4_prefix_mask_len", "from 1 to 32"},
		{&action.MaskedRemoteAddress{V6PrefixMaskLen: 129}, "masked_remote_address.v6_prefix_mask_len", "from 1 to 128"},
		{action.QueryParameters{DescriptorKey: "k"}, "query_parameters.query_parameter_name", "empty"},
		{action.QueryParameterValueMatch{DescriptorValue: "v", QueryParameters: []action.QueryParameterMatcher{{Name: "a"}, {}}},
			"query_parameter_value_match.query_parameters[1].name", "empty"},
	}
	for _, c := range cases {
		w, p := action.Check(c.action)
		if w != nil {
			t.Errorf("%#v: warnings %v", c.action, w)
		}
		if c.path == "" {
			if p != nil {
				t.Errorf("%#v: problems %v, want none", c.action, p)
			}
			continue
		}
		if len(p) != 1 || p[0].Path != c.path || !strings.Contains(p[0].Msg, c.msg) {
			t.Errorf("%#v: problems %v, want one at %s with %q", c.action, p, c.path, c.msg)
		}
	}
}

// FuzzQueryValue: any query string is read without panicking, and a
// parameter found is one the query names.
func FuzzQueryValue(f *testing.F) {
	f.Add("a=1&b=2", "a")
	f.Add("a=%zz&a=2", "a")
	f.Add("&&=&a", "")
	f.Add("a%20b=c+d", "a b")
	f.Add(";a=1", "a")
	f.Fuzz(func(t *testing.T, query, name string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.RawQuery = query
		v, ok := action.QueryValue(r, name)
		if !ok && v != "" {
			t.Errorf("QueryValue(%q, %q) = %q, false", query, name, v)
		}
		if ok && len(v) > len(query) {
			t.Errorf("QueryValue(%q, %q) = %q: longer than the query", query, name, v)
		}
	})
}

// BenchmarkNewActions: each new action's Entry on a request with a short
// query and a few cookies.
func BenchmarkNewActions(b *testing.B) {
	r := httptest.NewRequest("GET", "/a?x=1&fmt=csv&user=bob%20smith", nil)
	r.Header.Set("Cookie", "theme=dark; session=abc123; lang=en")
	id := identity.Identity{IP: netip.MustParseAddr("203.0.113.77")}
	for _, c := range []struct {
		name string
		a    action.Action
	}{
		{"masked_remote_address", action.MaskedRemoteAddress{V4PrefixMaskLen: 24}},
		{"query_parameters", action.QueryParameters{QueryParameterName: "user", DescriptorKey: "u"}},
		{"query_parameter_value_match", action.QueryParameterValueMatch{DescriptorValue: "v",
			QueryParameters: []action.QueryParameterMatcher{{Name: "fmt", Exact: "csv"}}}},
		{"cookie", action.Cookie{CookieName: "session", DescriptorKey: "s"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := c.a.Entry(r, id); !ok {
					b.Fatal("no entry")
				}
			}
		})
	}
}
