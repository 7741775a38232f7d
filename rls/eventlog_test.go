package rls_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

type downStore struct{}

func (downStore) Apply(context.Context, ratelimit.Request) (ratelimit.Decision, error) {
	return ratelimit.Decision{}, errors.New("test: redis: connection refused")
}

// TestLogsDoNotAmplify: a store outage, and a flood of denials, write a
// few aggregated lines, not one per request.
func TestLogsDoNotAmplify(t *testing.T) {
	cfg, err := rules.Parse("f.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	for _, tc := range []struct {
		name  string
		store ratelimit.Store
		msg   string
	}{
		{"outage", downStore{}, "store failed"},
		{"denials", memstore.New(memstore.Options{}), "over limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			srv, err := rls.New(tc.store, set, rls.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), LogInterval: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			req := &pb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{d("k", "v")}}
			for range 2000 {
				srv.ShouldRateLimit(context.Background(), req)
			}
			srv.Close() // flushes the summary
			out := logs.String()
			if n := strings.Count(out, tc.msg); n < 1 || n > 2 {
				t.Errorf("%d lines %q for 2000 requests, want 1 or 2 (the first, then a summary):\n%s", n, tc.msg, out)
			}
			if !strings.Contains(out, "count=") {
				t.Errorf("no count in the summary:\n%s", out)
			}
		})
	}
}

// TestReadyz: /readyz says ok and how the store is while serving, 503
// once draining; /healthcheck agrees.
func TestReadyz(t *testing.T) {
	srv, err := rls.New(memstore.New(memstore.Options{}), nil, rls.Options{StoreStatus: func() (bool, string) { return false, "store redis://x: unavailable" }})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w.Code, w.Body.String()
	}
	if code, body := get("/readyz"); code != 200 || body != "ok\nstore redis://x: unavailable\n" {
		t.Errorf("/readyz serving: %d %q", code, body)
	}
	srv.Shutdown()
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz draining: %d, want 503", code)
	}
	if code, _ := get("/healthcheck"); code != 500 {
		t.Errorf("/healthcheck draining: %d, want 500", code)
	}
}
