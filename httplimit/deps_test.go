package httplimit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// httplimit is middleware for anyone's server: it must not pull in
// Prometheus, Redis or gRPC (metrics go through Middleware.Observe).
func TestNoHeavyDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/sluicehq/sluice/httplimit").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/prometheus/", "github.com/redis/", "google.golang.org/grpc", "github.com/sluicehq/sluice/gateway", "github.com/sluicehq/sluice/redisstore"} {
			if strings.HasPrefix(p, bad) {
				t.Errorf("httplimit depends on %s", p)
			}
		}
	}
}
