package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestUnknownEnvRefused: a SLUICE_* variable that is none of the
// command's stops every command at start with a did-you-mean, and names no
// value; envoyproxy/ratelimit's variables keep their own handling. A
// misspelt SLUICE_HTTP_LISTEN was ignored, leaving sluice rls listening on
// every interface.
func TestUnknownEnvRefused(t *testing.T) {
	t.Setenv("SLUICE_HTTP_LISTN", "127.0.0.1:1")
	t.Setenv("SLUICE_NOTHING_LIKE_IT", "s3cret-value")
	t.Setenv("SLUICE_EMPTY_TYPO", "") // empty is as if unset
	t.Setenv("USE_STATSD", "false")   // upstream's, read by rls/runner/env.go
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rls", "--config-dir", ".", "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, "SLUICE_HTTP_LISTN: sluice rls reads no such variable; did you mean SLUICE_HTTP_LISTEN?"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, "SLUICE_HTTP_LISTN: sluice serve reads no such variable"},
		{[]string{"fetch", "http://127.0.0.1:1/"}, "SLUICE_HTTP_LISTN: sluice fetch reads no such variable"},
		{[]string{"check", "."}, "SLUICE_HTTP_LISTN: sluice check reads no such variable"},
		{[]string{"version"}, "SLUICE_HTTP_LISTN: sluice version reads no such variable"},
		{[]string{"sim", "brooker"}, "SLUICE_HTTP_LISTN: sluice sim brooker reads no such variable"},
	} {
		// Cancelled: a command that starts anyway (the old code) stops at
		// once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var stderr bytes.Buffer
		err := run(ctx, c.args, io.Discard, &stderr)
		out := stderr.String()
		if !errors.Is(err, errUsage) || !strings.Contains(out, c.want) {
			t.Errorf("%v: got %v\n%.300s\nwant a usage error saying %q", c.args, err, out, c.want)
		}
		if !strings.Contains(out, "SLUICE_NOTHING_LIKE_IT: ") || strings.Contains(out, "s3cret") || strings.Contains(out, "SLUICE_EMPTY_TYPO") {
			t.Errorf("%v: want SLUICE_NOTHING_LIKE_IT refused without its value, SLUICE_EMPTY_TYPO ignored:\n%.300s", c.args, out)
		}
	}
}

// TestKnownEnvAccepted: every command's own variables, and
// SLUICE_ADMIN_TOKEN on the servers, pass.
func TestKnownEnvAccepted(t *testing.T) {
	t.Setenv("SLUICE_ADMIN_TOKEN", "0123456789abcdef0123")
	t.Setenv("SLUICE_LOG_FORMAT", "json")
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"rls", "--config-dir", "/nonexistent-dir", "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, io.Discard, &stderr)
	if strings.Contains(stderr.String(), "no such variable") {
		t.Errorf("rls refused a known variable: %v\n%s", err, stderr.String())
	}
}
