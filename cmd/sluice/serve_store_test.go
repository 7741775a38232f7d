package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// serveStoreConfig limits / to 2 requests an hour, on the memory store
// unless --store says otherwise.
const serveStoreConfig = `
upstream: builtin:echo
routes:
  - path: /
    rate_limits:
      - actions: [{generic_key: {descriptor_value: all}}]
rules:
  domain: t
  descriptors:
    - key: generic_key
      value: all
      rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 2}
`

// TestServeStoreFlags: --store puts the counters in Redis in place of the
// config's memory store, with the password from --store-password-file
// (never shown): two gateways share one budget.
func TestServeStoreFlags(t *testing.T) {
	redistest.Require(t)
	r := redistest.Start(t)
	if _, err := r.Do("CONFIG", "SET", "requirepass", "s3cret-pw"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.yaml")
	pw := filepath.Join(dir, "redis.pw")
	if err := os.WriteFile(cfg, []byte(serveStoreConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pw, []byte("s3cret-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", cfg, "--store", "redis://" + r.Addr, "--store-password-file", pw}
	a, adminA, _ := serveProcess(t, args...)
	b, _, _ := serveProcess(t, args...)
	var got []int
	for _, base := range []string{a, b, a} {
		code, _ := status(t, base+"/")
		got = append(got, code)
	}
	if fmt.Sprint(got) != "[200 200 429]" {
		t.Errorf("two gateways on --store: %v, want [200 200 429] (one budget in Redis)", got)
	}
	res, err := http.Get(adminA + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "redis://") || strings.Contains(string(body), "s3cret") {
		t.Errorf("/readyz: %q, want the Redis store without its password", body)
	}
}

// TestServeStorePasswordUsage: a password for the memory store, or two
// sources of one, is a usage error that does not show it.
func TestServeStorePasswordUsage(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gw.yaml")
	if err := os.WriteFile(cfg, []byte(serveStoreConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("pw-from-file\n"), 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--store-password", "hunter2-pw"}, "needs a Redis --store URL"},
		{[]string{"--store", "memory", "--store-password-file", pw}, "needs a Redis --store URL"},
		{[]string{"--store", "redis://127.0.0.1:1", "--store-password", "hunter2-pw", "--store-password-file", pw}, "give one"},
	} {
		args := c.args
		var stderr strings.Builder
		err := run(context.Background(), append([]string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, args...), io.Discard, &stderr)
		if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: %v, want a usage error saying %q:\n%s", args, err, c.want, stderr.String())
		}
		if s := stderr.String() + fmt.Sprint(err); strings.Contains(s, "hunter2") || strings.Contains(s, "pw-from-file") {
			t.Errorf("%q: the password is shown: %s", args, s)
		}
	}
}
