package runner

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNewServeClose: New opens the store and loads the rules, its Server
// answers before anything listens, Serve returns once its context is done
// (after draining), and Close releases it; a directory that does not load
// is refused by New.
func TestNewServeClose(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := parseRLSFlags([]string{"--config-dir", dir, "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	r, err := New(context.Background(), f, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Server().Rules().Domains(); !slices.Equal(got, []string{"d"}) {
		t.Errorf("domains %q, want [d]", got)
	}
	for i, want := range []string{`"code":"OK"`, `"code":"OVER_LIMIT"`} {
		w := httptest.NewRecorder()
		r.Server().Handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(`{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`)))
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("call %d: %d %s, want %s", i, w.Code, w.Body, want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Serve(ctx); err != nil {
		t.Errorf("Serve after its context ended: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	f, err = parseRLSFlags([]string{"--config-dir", filepath.Join(dir, "none")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), f, log); err == nil || !strings.Contains(err.Error(), "config") {
		t.Errorf("New with no directory: %v, want a config error", err)
	}
}
