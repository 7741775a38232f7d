package httpclient

import (
	"context"
	"net"
	"net/http"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// RegistrableDomain is a HostKey that pools all the hosts of one operator:
// it maps a request to the registrable domain of its host, without the
// port, by the Public Suffix List (golang.org/x/net/publicsuffix, both
// its ICANN and its private sections). "www.example.co.uk" and
// "img.example.co.uk" are both "example.co.uk", while "alice.github.io"
// and "bob.github.io", "bucket.s3.amazonaws.com" or
// "x.blob.core.windows.net", whose suffixes are handed to different
// owners, each stay their own. IP addresses keep their port, and
// single-label hosts and hosts that are themselves public suffixes are
// kept as they are.
func RegistrableDomain(req *http.Request) string {
	host := strings.ToLower(req.URL.Hostname())
	if host == "" || net.ParseIP(host) != nil {
		return strings.ToLower(req.URL.Host)
	}
	host = strings.TrimSuffix(host, ".")
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return host
	}
	return d
}

type egressKey struct{}

// WithEgress returns a context that tells PerEgress which egress (the
// proxy, source address or session) a request leaves through. A crawler
// behind a proxy pool sets it where it picks the proxy, e.g. in the
// Proxy function of its http.Transport, reading it back with Egress.
func WithEgress(ctx context.Context, egress string) context.Context {
	return context.WithValue(ctx, egressKey{}, egress)
}

// Egress returns the egress WithEgress put in ctx, or "".
func Egress(ctx context.Context) string {
	s, _ := ctx.Value(egressKey{}).(string)
	return s
}

// PerEgress returns a HostKey that limits each (egress, host) pair on its
// own: host(req) (nil means the URL's host) prefixed with the request's
// Egress. The crawler guides' choice: a host sees each proxy of a pool as its own
// client, so per-pair limits let the pool go faster, while per host (the
// default) is the conservative one, since a host's pain is the total load
// on it. Requests without an egress share the host's key with each other.
func PerEgress(host func(*http.Request) string) func(*http.Request) string {
	if host == nil {
		host = func(r *http.Request) string { return strings.ToLower(r.URL.Host) }
	}
	return func(r *http.Request) string {
		h := host(r)
		if e := Egress(r.Context()); e != "" {
			return e + " " + h
		}
		return h
	}
}
