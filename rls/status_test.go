package rls_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
	"github.com/sluicehq/sluice/server/status"
)

const statusRules = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {name: per-ip, unit: hour, requests_per_unit: 2}
  - key: user
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
`

func statusServer(t *testing.T) (*rls.Server, *memstore.Store, *httptest.Server) {
	t.Helper()
	return statusServerWith(t, rls.Options{})
}

// statusServerWith is statusServer with the server's options.
func statusServerWith(t *testing.T, opts rls.Options) (*rls.Server, *memstore.Store, *httptest.Server) {
	t.Helper()
	cfg, err := rules.Parse("edge.yaml", []byte(statusRules))
	if err != nil {
		t.Fatal(err)
	}
	set, err := rules.NewSet(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	srv, err := rls.New(store, set, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return srv, store, hs
}

func hit(t *testing.T, srv *rls.Server, key, value string) pb.RateLimitResponse_Code {
	t.Helper()
	resp, err := srv.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "edge",
		Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: key, Value: value}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.OverallCode
}

func page(t *testing.T, hs *httptest.Server, query string) status.Page {
	t.Helper()
	res, err := http.Get(hs.URL + "/status.json" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p status.Page
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStatusTopDeniedAndLookup(t *testing.T) {
	srv, _, hs := statusServer(t)
	for range 10 {
		hit(t, srv, "remote_address", "10.0.0.9")
	}
	hit(t, srv, "remote_address", "10.0.0.1")
	for range 3 {
		hit(t, srv, "user", "mallory")
	}
	p := page(t, hs, "?identity=edge:+remote_address=10.0.0.9")
	if len(p.Rules) != 2 {
		t.Fatalf("got rules %+v", p.Rules)
	}
	ip, user := p.Rules[0], p.Rules[1]
	if ip.ID != "edge.remote_address" || ip.Denied != 8 || ip.Allowed != 3 || len(ip.TopDenied) != 1 || ip.TopDenied[0].Who != "remote_address=10.0.0.9" {
		t.Errorf("got per-ip %+v", ip)
	}
	if !user.Shadow || user.ShadowDenied != 2 || len(user.TopShadowDenied) != 1 || user.TopShadowDenied[0].Who != "user=mallory" {
		t.Errorf("got shadow rule %+v, want mallory would have been blocked twice", user)
	}
	if p.Lookup == nil || len(p.Lookup.Peeks) != 1 || p.Lookup.Peeks[0].Remaining != 0 || p.Lookup.Peeks[0].Rule != "edge.remote_address" {
		t.Errorf("got lookup %+v", p.Lookup)
	}
	// By store key, as the top-K table shows it; the peek charges nothing.
	key := ip.TopDenied[0].Key
	for range 2 {
		if p := page(t, hs, "?identity="+url.QueryEscape(key)); p.Lookup == nil || len(p.Lookup.Peeks) != 1 || p.Lookup.Peeks[0].Key != key {
			t.Errorf("lookup by key: got %+v", p.Lookup)
		}
	}
	if p := page(t, hs, "?identity=remote_address=10.0.0.1"); p.Lookup == nil || len(p.Lookup.Peeks) != 1 || p.Lookup.Peeks[0].Remaining != 1 {
		t.Errorf("10.0.0.1: got %+v, want 1 left", p.Lookup)
	}
	res, err := http.Get(hs.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "remote_address=10.0.0.9") || !strings.Contains(string(body), "<svg") {
		t.Errorf("page lacks the flooded descriptor or the chart")
	}
}

func TestAdminAPI(t *testing.T) {
	srv, store, hs := statusServer(t)
	call := func(method, path, token, body string) (int, string) {
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := call("POST", "/admin/reset", "", `{"identity":"remote_address=10.0.0.9"}`); code != 403 {
		t.Errorf("before SetAdmin: got %d, want 403", code)
	}
	reg := prometheus.NewRegistry()
	actions, err := control.NewActions(reg)
	if err != nil {
		t.Fatal(err)
	}
	const tok = "rls-admin-token-0123456789"
	srv.SetAdmin(tok, store, nil, actions)
	if code, _ := call("POST", "/admin/reset", "bad", `{"identity":"remote_address=10.0.0.9"}`); code != 401 {
		t.Errorf("bad token: got %d, want 401", code)
	}
	for range 3 {
		hit(t, srv, "remote_address", "10.0.0.9")
	}
	if got := hit(t, srv, "remote_address", "10.0.0.9"); got != pb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("got %v, want over", got)
	}
	if code, body := call("POST", "/admin/reset", tok, `{"identity":"edge: remote_address=10.0.0.9","rule":"edge.remote_address"}`); code != 200 {
		t.Fatalf("reset: %d %s", code, body)
	}
	if got := hit(t, srv, "remote_address", "10.0.0.9"); got != pb.RateLimitResponse_OK {
		t.Errorf("after reset: got %v, want OK", got)
	}
	// An override of 5 an hour: 4 more pass.
	if code, body := call("POST", "/admin/override", tok, `{"identity":"remote_address=10.0.0.9","rule":"edge.remote_address","rate":5,"period":"1h","ttl":"1h"}`); code != 200 {
		t.Fatalf("override: %d %s", code, body)
	}
	for i := range 4 {
		if got := hit(t, srv, "remote_address", "10.0.0.9"); got != pb.RateLimitResponse_OK {
			t.Errorf("under the override, hit %d: got %v", i, got)
		}
	}
	// Enforce the shadow rule on everyone.
	if code, body := call("POST", "/admin/enforce", tok, `{"rule":"edge.user","percent":100}`); code != 200 {
		t.Fatalf("enforce: %d %s", code, body)
	}
	hit(t, srv, "user", "eve")
	if got := hit(t, srv, "user", "eve"); got != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("shadow rule enforced at 100%%: got %v, want over", got)
	}
}
