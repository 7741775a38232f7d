package gateway_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/sluicehq/sluice/gateway"
)

// A gateway in front of the built-in echo API, limiting each client IP to
// two requests a minute.
func ExampleNew() {
	cfg, err := gateway.Parse("gateway.yaml", []byte(`
upstream: builtin:echo
routes:
  - path: /
    rate_limits:
      - actions: [{remote_address: {}}]
rules:
  domain: demo
  descriptors:
    - key: remote_address
      rate_limit: {name: per-ip, algorithm: token_bucket, unit: minute, requests_per_unit: 2}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	g, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer g.Close()
	h := g.Handler()
	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/hello", nil))
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "per-ip";r=1;t=30
	// 200 "per-ip";r=0;t=60
	// 429 "per-ip";r=0;t=60
}

// Parse reports every problem of a config at once.
func ExampleParse() {
	_, err := gateway.Parse("gateway.yaml", []byte(`
upstream: ftp://example.com
headers: loud
routes:
  - path: /
    rate_limits:
      - actions: [{remote_adress: {}}]
rules:
  domain: demo
  descriptors:
    - key: remote_address
      rate_limit: {unit: fortnight, requests_per_unit: 2}
`))
	fmt.Println(err)
	// Output:
	// gateway.yaml:2: upstream: want an http:// or https:// URL or builtin:echo, got "ftp://example.com"
	// gateway.yaml:3: headers: want ietf, legacy or opaque, got "loud"
	// gateway.yaml:7: routes[0].rate_limits[0].actions[0]: unknown field "remote_adress" (did you mean "remote_address"?)
	// gateway.yaml:12: rules.descriptors[0].rate_limit.unit: unknown unit "fortnight" (want second, minute, hour, day, week, month or year)
}
