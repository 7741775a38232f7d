package rls_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/server/tracing"
	"github.com/sluicehq/sluice/internal/testharness/otlptest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// TestJSONTraced: a POST /json's span is the child of its traceparent
// header, with each limited descriptor's rule and outcome (a shadow
// denial too) and no identity.
func TestJSONTraced(t *testing.T) {
	rcv := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.HTTPURL)
	tr, err := tracing.New(context.Background(), tracing.Config{Server: "sluice-rls", SamplingRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rules.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	store := memstore.New(memstore.Options{})
	defer store.Close()
	srv, err := rls.New(store, set, rls.Options{Headers: header.Off, Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	body := `{"domain":"test","descriptors":[{"entries":[{"key":"user","value":"alice"}]},{"entries":[{"key":"shadow","value":"x"}]}]}`
	for range 2 {
		req, _ := http.NewRequest("POST", ts.URL+"/json", strings.NewReader(body))
		req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	tr.Shutdown(context.Background())
	rcv.Wait(t, "4bf92f3577b34da6a3ce929d0e0e4736", 10*time.Second)
	spans := rcv.Spans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	s := spans[1]
	if s.ParentSpanID != "00f067aa0ba902b7" || s.Attrs["sluice.rule"] != "test.user,test.shadow" ||
		s.Attrs["sluice.outcome"] != "allowed,shadow_denied" || s.Attrs["sluice.decision"] != "shadow_denied" || s.Attrs["ratelimit.domain"] != "test" {
		t.Errorf("second span: parent %s, %v", s.ParentSpanID, s.Attrs)
	}
	if _, ok := s.Attrs["sluice.identity"]; ok {
		t.Errorf("identity unasked: %v", s.Attrs)
	}
}
