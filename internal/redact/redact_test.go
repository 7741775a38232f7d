package redact_test

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/redact"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:secret@h:6379/0":                "redis://u:xxxxx@h:6379/0",
		"redis://:secret@h:6379":                   "redis://:xxxxx@h:6379",
		"rediss://u:p%40ss@h?dial_timeout=1s":      "rediss://u:xxxxx@h?dial_timeout=1s",
		"redis-cluster://u:secret@h1:7000,h2:7001": "redis-cluster://u:xxxxx@h1:7000,h2:7001",
		"redis://h:6379/0":                         "redis://h:6379/0",
		"redis://user@h":                           "redis://user@h",
		"redis://h/0?x=a@b:c":                      "redis://h/0?x=a@b:c",
		"unix:///run/redis.sock":                   "unix:///run/redis.sock",
		"memory":                                   "memory",
		"":                                         "",
		"redis://u:s@cret@h":                       "redis://u:xxxxx@h",
		// Unencoded characters that end an authority: the password
		// is still masked whole.
		"redis://:Can#ary@h:6379/0":      "redis://:xxxxx@h:6379/0",
		"redis://u:a?b/c#d@h":            "redis://u:xxxxx@h",
		"redis://u:p:q@h":                "redis://u:xxxxx@h",
		"redis://u:50%off@h":             "redis://u:xxxxx@h",
		"u:secret@tcp(db:3306)/app":      "u:xxxxx@tcp(db:3306)/app",
		"redis://h/?password=secret&x=1": "redis://h/?password=xxxxx&x=1",
		"u:ab://cd@h":                    "u:xxxxx@h",
		"redis://u:p@h/?auth=s#frag":     "redis://u:xxxxx@h/?auth=xxxxx#frag",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestError(t *testing.T) {
	for _, raw := range []string{
		"redis://:Canary#Secret@h:6379/0",
		"redis://u:Canary%zzSecret@h",
		"redis://u:CanarySecret@h:port",
		`redis://u:Canary"Secret@h:port`,
	} {
		_, perr := url.Parse(raw)
		if perr == nil {
			t.Fatalf("url.Parse(%q) did not fail", raw)
		}
		err := redact.Error(raw, perr)
		for _, s := range []string{"Canary", "Secret"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("Error(%q) = %q: holds %q", raw, err, s)
			}
		}
		if !errors.Is(err, perr) && !errors.Is(err, redact.ErrUnencoded) {
			t.Errorf("Error(%q) = %v: wraps neither the parse error nor ErrUnencoded", raw, err)
		}
	}
	if got := redact.Error("redis://:Canary#Secret@h", errors.New("x")); !errors.Is(got, redact.ErrUnencoded) {
		t.Errorf("Error with an unencoded '#' = %v, want ErrUnencoded", got)
	}
	plain := errors.New("redis: invalid database number")
	if got := redact.Error("redis://u:pw@h/x", plain); got != plain {
		t.Errorf("Error of an error without the secret = %v, want it unchanged", got)
	}
	if redact.Error("redis://u:pw@h", nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}

func TestSecretAndValue(t *testing.T) {
	for name, want := range map[string]bool{
		"REDIS_AUTH": true, "REDIS_SENTINEL_AUTH": true, "store-password": true, "SLUICE_STORE_PASSWORD": true,
		"jwt-secret": true, "token": true, "store-password-file": false, "SLUICE_STORE_PASSWORD_FILE": false,
		"REDIS_URL": false, "store": false, "REDIS_TLS_CLIENT_KEY": false,
	} {
		if got := redact.Secret(name); got != want {
			t.Errorf("Secret(%q) = %v, want %v", name, got, want)
		}
	}
	if got := redact.Value("REDIS_SENTINEL_AUTH", "Canary"); got != redact.Mask {
		t.Errorf("Value(REDIS_SENTINEL_AUTH) = %q", got)
	}
	if got := redact.Value("REDIS_URL", "redis://:Canary@h"); got != "redis://:xxxxx@h" {
		t.Errorf("Value(REDIS_URL) = %q", got)
	}
}

// FuzzURL: whatever surrounds it, a password in a URL-ish string is
// never in URL's output, nor in Error's text about a parse of it.
func FuzzURL(f *testing.F) {
	for _, s := range [][4]string{
		{"redis://", "u", "secret", "h:6379/0"},
		{"redis-cluster://", "", "p#ss", "h1:7000,h2:7001/?timeout=1s"},
		{"", "u", "pa:ss@w%rd", "tcp(db:3306)/app"},
		{"rediss://", "u@x", "s/e?c#r@e:t", "h?password=x#f"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, scheme, user, password, rest string) {
		// The first ':' after the scheme starts the password: a user
		// name cannot hold one (RFC 3986). A password that is in the
		// visible parts, or is the mask, cannot be told apart.
		visible := scheme + user + ":" + redact.Mask + "@" + rest
		if strings.Contains(user, ":") || len(password) < 3 || strings.Contains(visible, password) || strings.Contains(strconv.Quote(visible), password) {
			return // (a quoted visible part is in url.Parse's errors)
		}
		if strings.HasPrefix(password, "//") {
			return // user://password@… is a URL with a scheme, not a DSN
		}
		raw := scheme + user + ":" + password + "@" + rest
		if got := redact.URL(raw); strings.Contains(got, password) {
			t.Fatalf("URL(%q) = %q: holds the password", raw, got)
		}
		_, perr := url.Parse(raw)
		_, rerr := url.Parse(redact.URL(raw))
		if perr != nil && (rerr == nil || !strings.Contains(rerr.Error(), password)) && !strings.Contains(redact.ErrUnencoded.Error(), password) {
			// (an error about the masked URL that holds the
			// password holds it in its own words)
			if got := redact.Error(raw, perr).Error(); strings.Contains(got, password) {
				t.Fatalf("Error(%q) = %q: holds the password", raw, got)
			}
		}
	})
}
