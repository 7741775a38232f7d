package rls_test

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/internal/server/accesslog"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// With Options.AccessLog, each limited descriptor of a request has a line:
// the rule, the outcome, the domain, the descriptor's keys (not its
// values) and the hashed store key; a store failure is store_error.
func TestAccessLog(t *testing.T) {
	cfg, err := rules.Parse("f.yaml", []byte("domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	for _, tc := range []struct {
		name  string
		store ratelimit.Store
		want  string
	}{
		{"decisions", memstore.New(memstore.Options{}), "allowed,denied,allowed"},
		{"outage", downStore{}, "store_error,store_error,store_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncBuffer
			al, err := accesslog.New(accesslog.Options{Writer: &buf, Server: "rls", Identity: accesslog.Hashed})
			if err != nil {
				t.Fatal(err)
			}
			srv, err := rls.New(tc.store, set, rls.Options{AccessLog: al})
			if err != nil {
				t.Fatal(err)
			}
			for _, user := range []string{"alice", "alice", "bob"} {
				srv.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{d("user", user)}})
			}
			srv.Close()
			al.Close()
			var outs []string
			var ids []string
			sc := bufio.NewScanner(strings.NewReader(buf.String()))
			for sc.Scan() {
				var m map[string]string
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatalf("%q: %v", sc.Text(), err)
				}
				if strings.Contains(sc.Text(), "alice") || m["domain"] != "d" || m["descriptor"] != "user" || m["rule"] != "d.user" || m["server"] != "rls" {
					t.Errorf("line %s: want domain d, descriptor user, rule d.user, no clear value", sc.Text())
				}
				outs, ids = append(outs, m["outcome"]), append(ids, m["identity"])
			}
			if strings.Join(outs, ",") != tc.want {
				t.Errorf("outcomes %v, want %s", outs, tc.want)
			}
			if len(ids) == 3 && (ids[0] != ids[1] || ids[0] == ids[2]) {
				t.Errorf("identities %v: want alice's twice, then bob's", ids)
			}
		})
	}
}
