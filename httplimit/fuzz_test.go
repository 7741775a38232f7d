package httplimit_test

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/identity"
)

// FuzzMiddleware: whatever the client sends (cost, credentials, forwarding
// headers, path, peer address), the middleware answers one of its statuses
// and never panics.
func FuzzMiddleware(f *testing.F) {
	f.Add("1", "key-alice", "203.0.113.1", "/a", "192.0.2.1:1")
	f.Add("-1", "", "", "/", "")
	f.Add("999999999999999999999", "Bearer x", "1.2.3.4, 5.6.7.8", "/%00", "[::1]:80")
	f.Add(" 3 ", "bad", "for=\"[2001:db8::1]:4711\"", "/x/y", "not-an-address")
	f.Add("2", "sid=abc; sid=\"x", "10.0.0.1", "user=%zz&user=bob&fmt=csv", "[2001:db8::1]:443")
	keys, err := identity.NewKeyStore(identity.APIKey{Hash: sha256.Sum256([]byte("key-alice")), User: "alice", Tier: "pro"})
	if err != nil {
		f.Fatal(err)
	}
	res, err := identity.NewResolver(identity.Options{APIKeys: keys, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}})
	if err != nil {
		f.Fatal(err)
	}
	mw := &httplimit.Middleware{Store: newStore(f), Rules: mustRules(f, testRules), Domain: "test", Identity: res, CostHeader: "X-Cost",
		Descriptors: identityDescriptors(action.GenericKey{DescriptorValue: "global"}, action.Path{}, action.Tier{Default: "none"},
			action.RequestHeaders{HeaderName: "X-Forwarded-For", DescriptorKey: "xff"},
			action.MaskedRemoteAddress{V4PrefixMaskLen: 24, V6PrefixMaskLen: 56},
			action.QueryParameters{QueryParameterName: "user", DescriptorKey: "query_user"},
			action.QueryParameterValueMatch{DescriptorValue: "csv", QueryParameters: []action.QueryParameterMatcher{{Name: "fmt", Prefix: "c"}}},
			action.Cookie{CookieName: "sid", DescriptorKey: "session", SkipIfAbsent: true})}
	h := mw.Handler(ok)
	f.Fuzz(func(t *testing.T, cost, key, xff, path, remote string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path = path
		r.RemoteAddr = remote
		r.Header["X-Cost"] = []string{cost}
		r.Header["X-Api-Key"] = []string{key}
		r.Header["X-Forwarded-For"] = []string{xff}
		r.Header["Forwarded"] = []string{xff}
		r.Header["Cookie"] = []string{key}
		r.URL.RawQuery = path
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusTooManyRequests:
		default:
			t.Errorf("status %d", w.Code)
		}
	})
}
