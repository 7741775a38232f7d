package runner

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/redact"
)

// StorePassword is --store-password and --store-password-file: the Redis
// password given apart from --store, so that it need not be in argv (where
// ps shows it) nor in a logged URL: from SLUICE_STORE_PASSWORD, a file
// (a Kubernetes or systemd secret), or envoyproxy/ratelimit's REDIS_AUTH.
type StorePassword struct{ password, file string }

// AddStorePasswordFlags adds --store-password and --store-password-file
// to fs.
func AddStorePasswordFlags(fs *flag.FlagSet) *StorePassword {
	p := &StorePassword{}
	fs.StringVar(&p.password, "store-password", "", "the Redis `PASSWORD`, put in --store's URL; prefer the variable or --store-password-file, since ps shows a command line")
	fs.StringVar(&p.file, "store-password-file", "", "read the Redis password from `FILE` (one line; a trailing newline is dropped)")
	return p
}

// Apply returns store with the password in its URL, or store itself when
// no password is given. Two sources of one password, a password for the
// memory store or for a URL that has one already, and an unreadable file
// are usage errors; none of them prints the password.
func (p *StorePassword) Apply(store string) (string, error) {
	pw := p.password
	if p.file != "" {
		if pw != "" {
			return "", fmt.Errorf("%w: --store-password and --store-password-file: give one", ErrUsage)
		}
		b, err := os.ReadFile(p.file)
		if err != nil {
			return "", fmt.Errorf("%w: --store-password-file: %v", ErrUsage, err)
		}
		pw = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if pw == "" || strings.ContainsAny(pw, "\r\n") {
			return "", fmt.Errorf("%w: --store-password-file %s: want one non-empty line", ErrUsage, p.file)
		}
	}
	if pw == "" {
		return store, nil
	}
	scheme, rest, ok := strings.Cut(store, "://")
	if !ok {
		return "", fmt.Errorf("%w: a store password needs a Redis --store URL, not %q", ErrUsage, store)
	}
	host := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 && scheme != "unix" {
		host = rest[:i]
	}
	user := ""
	if at := strings.LastIndex(host, "@"); at >= 0 {
		user, rest = host[:at], rest[at+1:]
		if strings.Contains(user, ":") {
			return "", fmt.Errorf("%w: --store %s has a password already, and one is given apart", ErrUsage, redact.URL(store))
		}
	}
	return scheme + "://" + user + ":" + urlPassword(pw) + "@" + rest, nil
}

// urlPassword escapes a password for a URL's userinfo.
func urlPassword(p string) string {
	return strings.TrimPrefix(url.UserPassword("", p).String(), ":")
}
