package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/server/control"
	statuspage "github.com/sluicehq/sluice/server/status"
)

// sluice rls --admin-token-file: the admin API answers with the token,
// 401 without it, and /status shows the example's search limit denying.
func TestRLSAdminTokenFile(t *testing.T) {
	t.Setenv(control.TokenEnv, "")
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("rls-admin-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	grpcAddr, httpAddr, _ := startRLS(t, "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--admin-token-file", tok)
	askRLS(t, grpcAddr, 6) // more than the 5 a second of the search limit, in any window
	call := func(token string) int {
		req, _ := http.NewRequest("GET", "http://"+httpAddr+"/admin/state", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := call(""); got != 401 {
		t.Errorf("no token: got %d, want 401", got)
	}
	if got := call("rls-admin-token-0123456789"); got != 200 {
		t.Errorf("token: got %d, want 200", got)
	}
	res, err := http.Get("http://" + httpAddr + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var p statuspage.Page
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	denied := uint64(0)
	for _, r := range p.Rules {
		denied += r.Denied
	}
	if p.Store.FailurePolicy != "error" || p.Store.URL != "memory" {
		t.Errorf("got store %+v, want memory with the error policy", p.Store)
	}
	if denied != 1 {
		t.Errorf("got %d denials on the page, want 1: %s", denied, b)
	}
}

func TestRLSAdminTokenTooShort(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"rls", "--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--admin-token-file", tok}, io.Discard, io.Discard)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "admin-token-file") {
		t.Errorf("got %v, want a usage error naming --admin-token-file", err)
	}
}
