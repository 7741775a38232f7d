package rls_test

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// ExampleDialStatsd sends envoyproxy/ratelimit's stats to a statsd server
// (here a UDP socket of the example's own) as that server names them.
func ExampleDialStatsd() {
	statsd, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(err)
	}
	defer statsd.Close()
	sd, err := rls.DialStatsd(statsd.LocalAddr().String(), rls.StatsdOptions{FlushInterval: time.Hour})
	if err != nil {
		panic(err)
	}
	defer sd.Close()

	cfg, err := rules.Parse("edge.yaml", []byte(`domain: edge
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 1}
`))
	if err != nil {
		panic(err)
	}
	set, _ := rules.NewSet(cfg)
	clock := func() time.Time { return time.Unix(1772445600, 0) } // fixed: one window
	store := memstore.New(memstore.Options{Now: clock})
	defer store.Close()
	srv, err := rls.New(store, set, rls.Options{Statsd: sd, LocalCacheSize: 1 << 20, Now: clock})
	if err != nil {
		panic(err)
	}
	for range 3 {
		srv.ShouldRateLimit(context.Background(), sdReq("edge", 1, "api_key", "k"))
	}
	sd.Flush() // sent every FlushInterval, and on Close

	var lines []string
	buf := make([]byte, 64<<10)
	for {
		statsd.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := statsd.Read(buf)
		if err != nil {
			break
		}
		for _, ln := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
			if strings.HasPrefix(ln, "ratelimit.service.") || strings.HasPrefix(ln, "ratelimit.localcache.hit") {
				lines = append(lines, ln)
			}
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
	// Output:
	// ratelimit.localcache.hitCount:1|g
	// ratelimit.service.rate_limit.edge.api_key.near_limit:1|c
	// ratelimit.service.rate_limit.edge.api_key.over_limit:2|c
	// ratelimit.service.rate_limit.edge.api_key.over_limit_with_local_cache:1|c
	// ratelimit.service.rate_limit.edge.api_key.total_hits:3|c
	// ratelimit.service.rate_limit.edge.api_key.within_limit:1|c
}
