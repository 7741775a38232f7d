package gateway_test

import (
	"fmt"
	"testing"
)

// actionsConfig: behind a trusted proxy (127.0.0.1), /net is limited per
// /24 of the forwarded client, /nat per client IP and session cookie (a
// client without the cookie per IP alone), and /export per IP when
// ?format=csv.
const actionsConfig = `
listen: 127.0.0.1:0
admin_listen: 127.0.0.1:0
upstream: builtin:echo
identity:
  trusted_proxies: [127.0.0.1]
routes:
  - path: /net
    rate_limits:
      - actions: [{masked_remote_address: {v4_prefix_mask_len: 24}}]
  - path: /nat
    rate_limits:
      - actions:
          - remote_address: {}
          - cookie: {cookie_name: session, descriptor_key: session, skip_if_absent: true}
  - path: /export
    rate_limits:
      - actions:
          - remote_address: {}
          - query_parameter_value_match:
              descriptor_value: csv
              query_parameters: [{name: format, string_match: {exact: csv, ignore_case: true}}]
rules:
  domain: t
  descriptors:
    - key: masked_remote_address
      rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 3}
    - key: remote_address
      rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 1}
      descriptors:
        - key: session
          rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 2}
        - key: query_match
          value: csv
          rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 1}
`

// TestNewActionsThroughGateway drives the new actions through a serving
// gateway behind a trusted proxy.
func TestNewActionsThroughGateway(t *testing.T) {
	t.Parallel()
	s := start(t, "", actionsConfig)
	c := clientFrom(t, "127.0.0.1")
	xff := func(ip string, more ...string) []string { return append([]string{"X-Forwarded-For", ip}, more...) }

	// masked_remote_address: three clients of one /24 share 3 requests; the
	// next /24 has its own. The mask applies to the forwarded client, not
	// to the proxy.
	var got []int
	for i := range 4 {
		got = append(got, get(t, c, s.url+"/net", xff(fmt.Sprintf("198.51.100.%d", 1+i%3))...).code)
	}
	got = append(got, get(t, c, s.url+"/net", xff("198.51.101.1")...).code)
	if want := "[200 200 200 429 200]"; fmt.Sprint(got) != want {
		t.Errorf("/net per /24: %v, want %s", got, want)
	}

	// cookie: behind one address, each session gets 2; another session
	// its own 2; no cookie: the address alone, 1.
	got = got[:0]
	for _, sess := range []string{"a", "a", "a", "b", "b"} {
		got = append(got, get(t, c, s.url+"/nat", xff("203.0.113.9", "Cookie", "session="+sess)...).code)
	}
	got = append(got, codes(t, c, s.url+"/nat", 2, xff("203.0.113.9")...)...)
	if want := "[200 200 429 200 200 200 429]"; fmt.Sprint(got) != want {
		t.Errorf("/nat per IP and session: %v, want %s", got, want)
	}

	// query_parameter_value_match: ?format=CSV is limited, other formats
	// are not.
	got = got[:0]
	for _, q := range []string{"format=csv", "format=CSV", "format=json", "x=1&format=Csv"} {
		got = append(got, get(t, c, s.url+"/export?"+q, xff("203.0.113.10")...).code)
	}
	if want := "[200 429 200 429]"; fmt.Sprint(got) != want {
		t.Errorf("/export csv: %v, want %s", got, want)
	}
}
