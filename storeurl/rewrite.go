package storeurl

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/internal/redact"
	"net/url"
	"os"
	"strings"
)

// TLS query parameters of rediss:// and rediss-cluster:// URLs: files
// read at Open.
const (
	ParamTLSCA   = "tls_ca"   // PEM CA bundle the server's certificate must chain to
	ParamTLSCert = "tls_cert" // PEM client certificate (Redis's tls-auth-clients)
	ParamTLSKey  = "tls_key"  // its PEM private key
)

// rewrite turns the URL forms storeurl adds into what redisstore.Open
// takes: the TLS files of a rediss URL's query become a tls.Config, and
// a redis-sentinel:// URL becomes rueidis's Sentinel form
// (redis://first-sentinel/db?master_set=NAME&addr=other-sentinel…).
func rewrite(raw string) (string, *tls.Config, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw, nil, nil
	}
	base, query, _ := strings.Cut(rest, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", nil, fmt.Errorf("URL %s: query: %v", redact.URL(raw), redact.Error(raw, err))
	}
	tc, err := tlsFromQuery(scheme, q)
	if err != nil {
		return "", nil, fmt.Errorf("URL %s: %w", redact.URL(raw), err)
	}
	switch scheme {
	case "redis-sentinel", "sentinel":
		out, err := sentinelURL(base, q)
		if err != nil {
			return "", nil, fmt.Errorf("URL %s: %w", redact.URL(raw), err)
		}
		return out, tc, nil
	}
	if tc == nil {
		return raw, nil, nil
	}
	out := scheme + "://" + base
	if e := q.Encode(); e != "" {
		out += "?" + e
	}
	return out, tc, nil
}

// tlsFromQuery takes tls_ca, tls_cert and tls_key out of q and reads
// them into a tls.Config, or returns nil when q has none.
func tlsFromQuery(scheme string, q url.Values) (*tls.Config, error) {
	ca, cert, key := q.Get(ParamTLSCA), q.Get(ParamTLSCert), q.Get(ParamTLSKey)
	if !q.Has(ParamTLSCA) && !q.Has(ParamTLSCert) && !q.Has(ParamTLSKey) {
		return nil, nil
	}
	q.Del(ParamTLSCA)
	q.Del(ParamTLSCert)
	q.Del(ParamTLSKey)
	if scheme != "rediss" && scheme != "rediss-cluster" {
		return nil, fmt.Errorf("%s, %s and %s need rediss:// or rediss-cluster://", ParamTLSCA, ParamTLSCert, ParamTLSKey)
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%s and %s go together", ParamTLSCert, ParamTLSKey)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ParamTLSCA, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", ParamTLSCA, ca)
		}
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", ParamTLSCert, ParamTLSKey, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// sentinelURL rewrites the body of redis-sentinel://[user:password@]
// host:port[,host:port…]/MASTER[/DB] (the sentinels, then the master set
// name as envoyproxy/ratelimit's REDIS_URL "MASTER,host:port,…" names it)
// for rueidis. user and password are the master's (REDIS_AUTH); the
// sentinels are asked without a password and without TLS.
func sentinelURL(body string, q url.Values) (string, error) {
	userinfo := ""
	if at := strings.LastIndex(body, "@"); at >= 0 {
		userinfo, body = body[:at+1], body[at+1:]
	}
	hosts, path, _ := strings.Cut(body, "/")
	var addrs []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r == '#' || r == '?' || r == '\\' || r == 0x7f }) {
			return "", fmt.Errorf("sentinel address %q: want host:port", h)
		}
		addrs = append(addrs, h)
	}
	if len(addrs) == 0 {
		return "", errors.New("no sentinel host")
	}
	master, db, _ := strings.Cut(path, "/")
	if strings.ContainsFunc(db, func(r rune) bool { return r < '0' || r > '9' }) {
		return "", fmt.Errorf("database %q: want a number", db)
	}
	if m := q.Get("master_set"); master == "" && m != "" {
		master = m
	}
	if master == "" {
		return "", errors.New("no master set name: want redis-sentinel://host:port,host:port/MASTER")
	}
	q.Set("master_set", master)
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	out := "redis://" + userinfo + addrs[0]
	if db != "" {
		out += "/" + db
	}
	out += "?" + q.Encode()
	// What reads it (net/url, in rueidis) must see the same parts: a '#',
	// '/' or '?' in the user info or a host would move them.
	if u, err := url.Parse(out); err != nil || u.Host != addrs[0] || u.Query().Get("master_set") != master {
		return "", errors.New("malformed: percent-encode special characters of the user and password")
	}
	return out, nil
}
