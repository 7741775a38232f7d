package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/url"
	"os"
	"path/filepath"
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

func TestStorePassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("p@ss:w/rd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(dir, "two")
	os.WriteFile(two, []byte("a\nb\n"), 0o600)
	for _, tc := range []struct {
		p            storePassword
		store, want  string
		wantErr      string
		wantPassword string
	}{
		{storePassword{}, "redis://r:6379", "redis://r:6379", "", ""},
		{storePassword{password: "s3cret"}, "redis://r:6379/0", "redis://:s3cret@r:6379/0", "", "s3cret"},
		{storePassword{file: file}, "rediss://app@r:6380", "", "", "p@ss:w/rd"},
		{storePassword{password: "x y"}, "redis-cluster://a:1,b:2", "", "", "x y"},
		{storePassword{password: "pw"}, "unix:///run/redis.sock", "unix://:pw@/run/redis.sock", "", "pw"},
		{storePassword{password: "pw"}, "memory", "", "needs a Redis --store URL", ""},
		{storePassword{password: "pw"}, "redis://:old@r:1", "", "has a password already", ""},
		{storePassword{password: "pw", file: file}, "redis://r:1", "", "give one", ""},
		{storePassword{file: filepath.Join(dir, "none")}, "redis://r:1", "", "--store-password-file", ""},
		{storePassword{file: two}, "redis://r:1", "", "want one non-empty line", ""},
	} {
		got, err := tc.p.apply(tc.store)
		if tc.wantErr != "" {
			if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v.apply(%q) = %q, %v; want a usage error with %q", tc.p, tc.store, got, err, tc.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "pw") && tc.p.password == "pw" || strings.Contains(err.Error(), "old")) {
				t.Errorf("the error shows a password: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v.apply(%q): %v", tc.p, tc.store, err)
			continue
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("%+v.apply(%q) = %q, want %q", tc.p, tc.store, got, tc.want)
		}
		if tc.wantPassword != "" {
			// The password reaches the URL as rueidis will read it.
			u, err := url.Parse(strings.Replace(got, "redis-cluster://", "redis://", 1))
			if err != nil {
				t.Errorf("%q: %v", got, err)
				continue
			}
			if pw, _ := u.User.Password(); pw != tc.wantPassword {
				t.Errorf("%q carries password %q, want %q", got, pw, tc.wantPassword)
			}
		}
	}
}

// FuzzStorePassword: any password given apart reaches the URL intact.
func FuzzStorePassword(f *testing.F) {
	f.Add("s3cret", "redis://r:6379/0")
	f.Add("p@ss:w/rd?#%", "rediss://user@r:6380")
	f.Add("", "unix:///run/r.sock")
	f.Fuzz(func(t *testing.T, pw, store string) {
		if pw == "" || !strings.HasPrefix(store, "redis://") {
			return
		}
		got, err := (&storePassword{password: pw}).apply(store)
		if err != nil {
			return
		}
		u, err := url.Parse(got)
		if err != nil {
			return // a store URL that was bad before the password
		}
		if _, perr := url.Parse(store); perr == nil {
			if p, _ := u.User.Password(); p != pw {
				t.Errorf("apply(%q) with %q = %q: password %q", store, pw, got, p)
			}
		}
	})
}
