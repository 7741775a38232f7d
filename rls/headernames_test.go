package rls_test

import (
	"maps"
	"testing"

	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
)

// TestHeaderNames checks HeadersLegacy renamed as envoyproxy/ratelimit's
// LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and LIMIT_RESET_HEADER rename
// its headers (src/service/ratelimit.go): the descriptor closest to its
// limit, an over-limit one outright.
func TestHeaderNames(t *testing.T) {
	t.Parallel()
	headers := func(h *harness, descs ...string) map[string]string {
		m := map[string]string{}
		resp := h.call(t, 0, d(descs...))
		for _, hv := range resp.ResponseHeadersToAdd {
			m[hv.Key] = hv.Value
		}
		return m
	}
	t.Run("envoy", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, rls.Options{Headers: header.Legacy, HeaderNames: header.EnvoyNames})
		if got, want := headers(h, "general", "g"), map[string]string{
			"RateLimit-Limit": "1", "RateLimit-Remaining": "0", "RateLimit-Reset": "30",
		}; !maps.Equal(got, want) {
			t.Errorf("headers = %v, want %v", got, want)
		}
		// Over the limit: the same three, and no Retry-After (upstream sends none).
		if got, want := headers(h, "general", "g"), map[string]string{
			"RateLimit-Limit": "1", "RateLimit-Remaining": "0", "RateLimit-Reset": "30",
		}; !maps.Equal(got, want) {
			t.Errorf("over the limit: headers = %v, want %v", got, want)
		}
	})
	t.Run("renamed", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, rls.Options{Headers: header.Legacy,
			HeaderNames: header.Names{Limit: "X-Quota", Remaining: "X-Quota-Left", Reset: "X-Quota-Reset"}})
		headers(h, "general", "g")
		if got, want := headers(h, "general", "g"), map[string]string{
			"X-Quota": "1", "X-Quota-Left": "0", "X-Quota-Reset": "30", "Retry-After": "30",
		}; !maps.Equal(got, want) {
			t.Errorf("headers = %v, want %v", got, want)
		}
	})
	t.Run("ietf ignores names", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, nil, rls.Options{Headers: header.IETF, HeaderNames: header.EnvoyNames})
		if got := headers(h, "general", "g"); got["RateLimit-Policy"] == "" || got["RateLimit-Limit"] != "" {
			t.Errorf("headers = %v, want the IETF ones", got)
		}
	})
	t.Run("invalid name", func(t *testing.T) {
		t.Parallel()
		if _, err := rls.New(memoryStore(t, nil), nil, rls.Options{HeaderNames: header.Names{Limit: "Bad Name"}}); err == nil {
			t.Error("New with header name \"Bad Name\" = nil error")
		}
	})
}
