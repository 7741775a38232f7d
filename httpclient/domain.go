package httpclient

import (
	"net"
	"net/http"
	"strings"
)

// RegistrableDomain is a HostKey that pools all the hosts of a site: it maps
// a request to the registrable domain of its host ("www.example.co.uk" and
// "img.example.co.uk" are both "example.co.uk"), without the port. IP
// addresses and single-label hosts are kept as they are.
//
// It is an approximation that needs no data: the last two labels, or the
// last three when the second-to-last is a common second-level label (co,
// com, net, org, gov, edu, ac, …) under a two-letter country code. For
// the exact answer, build a HostKey on golang.org/x/net/publicsuffix's
// EffectiveTLDPlusOne, which sluice does not import.
func RegistrableDomain(req *http.Request) string {
	host := strings.ToLower(req.URL.Hostname())
	if host == "" || net.ParseIP(host) != nil {
		return strings.ToLower(req.URL.Host)
	}
	host = strings.TrimSuffix(host, ".")
	labels := strings.Split(host, ".")
	n := len(labels)
	if n <= 2 {
		return host
	}
	keep := 2
	if len(labels[n-1]) == 2 && secondLevel[labels[n-2]] {
		keep = 3
	}
	return strings.Join(labels[n-keep:], ".")
}

var secondLevel = map[string]bool{
	"co": true, "com": true, "net": true, "org": true, "gov": true, "edu": true,
	"ac": true, "or": true, "ne": true, "go": true, "gob": true, "gv": true,
	"mil": true, "nic": true, "ltd": true, "plc": true, "sch": true,
}
