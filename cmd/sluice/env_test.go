package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testFlags is a flag set as the commands make theirs.
func testFlags() (*flag.FlagSet, *int, *string, *time.Duration) {
	fs := newFlagSet("envtest", "", io.Discard)
	n := fs.Int("max-keys", 10, "keys")
	s := fs.String("store-url", "memory", "store")
	d := fs.Duration("poll", time.Second, "poll")
	return fs, n, s, d
}

// TestEnvPrecedence: a flag on the command line wins over its SLUICE_*
// variable, which wins over the default; an empty variable is unset.
func TestEnvPrecedence(t *testing.T) {
	t.Setenv("SLUICE_MAX_KEYS", "20")
	t.Setenv("SLUICE_STORE_URL", "redis://r:6379")
	t.Setenv("SLUICE_POLL", "")
	fs, n, s, d := testFlags()
	if err := parseFlags(fs, []string{"--max-keys", "30"}); err != nil {
		t.Fatal(err)
	}
	if *n != 30 || *s != "redis://r:6379" || *d != time.Second {
		t.Errorf("max-keys %d store-url %q poll %v; want 30 (flag), redis://r:6379 (env), 1s (default)", *n, *s, *d)
	}
}

// TestEnvBadValue: a value the flag refuses is a usage error naming the
// variable, for every command.
func TestEnvBadValue(t *testing.T) {
	t.Setenv("SLUICE_MAX_KEYS", "many")
	fs, _, _, _ := testFlags()
	err := parseFlags(fs, nil)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `SLUICE_MAX_KEYS="many": invalid value for --max-keys`) {
		t.Errorf("parseFlags = %v, want a usage error naming SLUICE_MAX_KEYS", err)
	}
	var stderr bytes.Buffer
	err = run(context.Background(), []string{"rls", "--config-dir", "."}, io.Discard, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), `sluice rls: SLUICE_MAX_KEYS="many"`) {
		t.Errorf("rls with SLUICE_MAX_KEYS=many: %v\n%s", err, stderr.String())
	}
	t.Setenv("SLUICE_MAX_KEYS", "")
	t.Setenv("SLUICE_LOG_LEVEL", "chatty")
	stderr.Reset()
	err = run(context.Background(), []string{"serve"}, io.Discard, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), `SLUICE_LOG_LEVEL="chatty": invalid value for --log-level: want debug, info, warn or error`) {
		t.Errorf("serve with SLUICE_LOG_LEVEL=chatty: %v\n%s", err, stderr.String())
	}
}

// TestEnvShownInHelp: every flag of every command names its variable.
func TestEnvShownInHelp(t *testing.T) {
	t.Parallel()
	flagRE := regexp.MustCompile(`(?m)^  -(\S+)`)
	cmds := [][]string{{"serve"}, {"rls"}, {"fetch"}, {"check"}, {"version"}, {"sim", "brooker"}}
	for _, args := range cmds {
		var stderr bytes.Buffer
		run(context.Background(), append(args, "--help"), io.Discard, &stderr)
		help := stderr.String()
		names := flagRE.FindAllStringSubmatch(help, -1)
		if len(names) == 0 {
			t.Errorf("%v --help lists no flags:\n%s", args, help)
		}
		for _, m := range names {
			if m[1] == versionFlag { // no variable: SLUICE_VERSION is refused
				continue
			}
			if !strings.Contains(help, "(env "+envVar(m[1])) {
				t.Errorf("%v --help does not name %s for --%s", args, envVar(m[1]), m[1])
			}
		}
	}
	var stderr bytes.Buffer
	run(context.Background(), []string{"rls", "--help"}, io.Discard, &stderr)
	for _, want := range []string{"(env SLUICE_MAX_KEYS)", "(env SLUICE_STORE; envoyproxy/ratelimit's REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_URL, REDIS_AUTH, REDIS_TLS, REDIS_TLS_CLIENT_CERT"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("rls --help lacks %q", want)
		}
	}
}
