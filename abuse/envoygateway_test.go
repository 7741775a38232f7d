package abuse

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/structpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

// egDir holds the Deployment and ConfigMap Envoy Gateway generates for
// its rate limit service (v1.9.0; the same environment v1.5.0 to main).
var egDir = filepath.Join("testdata", "envoy-gateway")

// egDeployment returns the ratelimit container and the volumes of the
// Deployment in egDir whose sluice.test/case annotation is which.
func egDeployment(t *testing.T, which string) (corev1.Container, []corev1.Volume) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(egDir, "ratelimit-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if d.Annotations["sluice.test/case"] == which {
			return d.Spec.Template.Spec.Containers[0], d.Spec.Template.Spec.Volumes
		}
	}
	t.Fatalf("no Deployment %q in %s", which, egDir)
	return corev1.Container{}, nil
}

// egPod lays out on disk what the kubelet would mount for c: the certs
// Secret (envoy-rate-limit: tls.crt, tls.key, ca.crt, one certificate
// that serves gRPC and is the xDS client's) and the statsd-exporter-config
// ConfigMap. It returns the container's environment with each path under
// a mount point moved to where it was laid out, and values the pod would
// get from the cluster replaced by the test's (the fieldRef pod name,
// and what subst names: the Services of Envoy Gateway, Redis and the
// trace collector).
func egPod(t *testing.T, ca *testcerts.CA, c corev1.Container, vols []corev1.Volume, subst map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	var cm corev1.ConfigMap
	b, err := os.ReadFile(filepath.Join(egDir, "statsd-exporter-config.yaml"))
	if err == nil {
		err = yaml.UnmarshalStrict(b, &cm)
	}
	if err != nil {
		t.Fatal(err)
	}
	mounts := map[string]string{} // mount path -> directory
	for _, m := range c.VolumeMounts {
		at := filepath.Join(dir, m.Name)
		if err := os.MkdirAll(at, 0o700); err != nil {
			t.Fatal(err)
		}
		mounts[m.MountPath] = at
		for _, v := range vols {
			switch {
			case v.Name != m.Name:
			case v.Secret != nil && v.Secret.SecretName == "envoy-rate-limit":
				pair := ca.Peer("envoy-ratelimit", "envoy-ratelimit.envoy-gateway-system.svc.cluster.local")
				writeFile(t, at, "tls.crt", string(pair.CertPEM))
				writeFile(t, at, "tls.key", string(pair.KeyPEM))
				writeFile(t, at, "ca.crt", string(ca.PEM))
			case v.ConfigMap != nil && v.ConfigMap.Name == cm.Name:
				for name, data := range cm.Data {
					writeFile(t, at, name, data)
				}
			default:
				t.Fatalf("volume %s: not laid out by the test", v.Name)
			}
		}
	}
	env := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
				t.Fatalf("%s: a source the test does not fill", e.Name)
			}
			v = "envoy-ratelimit-6f9c7d5b8-x2x7q"
		}
		for from, to := range mounts {
			if strings.HasPrefix(v, from+"/") {
				v = to + strings.TrimPrefix(v, from)
			}
		}
		if s, ok := subst[v]; ok {
			v = s
		}
		env[e.Name] = v
	}
	return env
}

// egXDSServer is Envoy Gateway's rate limit xDS server as its global
// rate limit runner builds it: a go-control-plane server over a snapshot
// cache that is not ADS-ordered, behind TLS 1.3 that requires a client
// certificate from the same CA; snapshots for node envoy-ratelimit,
// versions counting up from 1.
func egXDSServer(t *testing.T, ca *testcerts.CA) *managementServer {
	t.Helper()
	cert := ca.Peer("envoy-gateway", "envoy-gateway", "envoy-gateway.envoy-gateway-system.svc.cluster.local")
	return startManagementServerWith(t, false, grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert.TLS()}, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(),
	})))
}

// egRules is what Envoy Gateway translates a BackendTrafficPolicy's
// global rule into (domain and descriptor keys of its naming), and two
// quota_mode descriptors (one with metadata) as upstream's schema has
// them.
func egRules(t *testing.T, perHour uint32) *rlsconf.RateLimitConfig {
	md, err := structpb.NewStruct(map[string]any{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	return &rlsconf.RateLimitConfig{Name: "default/eg/http", Domain: "default/eg/http", Descriptors: []*rlsconf.RateLimitDescriptor{
		{Key: "httproute/default/backend/rule/0/match/0", Value: "httproute/default/backend/rule/0/match/0",
			RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: perHour}},
		{Key: "quota", Value: "a", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: 1}, QuotaMode: true, Metadata: md},
		{Key: "quota", Value: "b", RateLimit: &rlsconf.RateLimitPolicy{Unit: rlsconf.RateLimitUnit_HOUR, RequestsPerUnit: 5}, QuotaMode: true},
	}}
}

var metricsAddr = regexp.MustCompile(`msg="sluice rls: listening" .*metrics=(\S+)`)

// TestEnvoyGatewayDeployment replays the rate limit Deployment Envoy
// Gateway generates, with tracing off and on, against the built binary:
// its command (/bin/ratelimit), its environment and nothing else, the
// certs Secret and statsd-exporter-config ConfigMap laid out where the
// environment names them, Redis, and the rules pushed by a
// go-control-plane server configured as Envoy Gateway's. Envoy asks over
// mTLS and is answered by the rules pushed; the probe path answers;
// PROMETHEUS_ADDR serves the series Envoy Gateway's mapping names; with
// tracing on, spans reach the OTLP endpoint.
func TestEnvoyGatewayDeployment(t *testing.T) {
	for _, which := range []string{"tracing off", "tracing on"} {
		t.Run(strings.ReplaceAll(which, " ", "_"), func(t *testing.T) { egReplay(t, which) })
	}
}

func egReplay(t *testing.T, which string) {
	redistest.Require(t)
	rs := redistest.Start(t)
	ca := testcerts.NewCA("envoy-gateway")
	ms := egXDSServer(t, ca)
	var spans atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			spans.Add(1)
		}
	}))
	t.Cleanup(collector.Close)

	c, vols := egDeployment(t, which)
	if len(c.Command) != 1 || c.Command[0] != "/bin/ratelimit" {
		t.Fatalf("command %q", c.Command)
	}
	env := egPod(t, ca, c, vols, map[string]string{
		"envoy-gateway:18001":  ms.addr,
		"redis.redis.svc:6379": rs.Addr,
		":19001":               "127.0.0.1:0",
		"http://trace-collector.envoy-gateway-system.svc.cluster.local:4318": collector.URL,
	})
	// The pod's own listeners (0.0.0.0:8080, 8081, 6070 by default) on
	// free loopback ports.
	for k, v := range map[string]string{"HOST": "127.0.0.1", "PORT": "0", "GRPC_HOST": "127.0.0.1", "GRPC_PORT": "0",
		"DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": "0"} {
		env[k] = v
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	ms.push(t, "envoy-ratelimit", "1", egRules(t, 2))
	p, m, err := startProcAs(t, "sluice rls ("+which+")", rlsReady, c.Command[0])
	if err != nil {
		if which == "tracing on" && strings.Contains(err.Error(), "TRACING_ENABLED") {
			t.Skipf("tracing on: the binary refuses Envoy Gateway's TRACING_ENABLED=true (not built yet): %s", firstLine(err.Error(), "TRACING_ENABLED"))
		}
		t.Fatal(err)
	}
	r := &rlsProc{proc: p, grpc: m[1], http: "http://" + m[2]}

	envoy := ca.Client("envoy", nil, "spiffe://cluster.local/ns/envoy-gateway-system/sa/envoy")
	conn, err := grpc.NewClient(r.grpc, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: ca.Pool(), ServerName: "envoy-ratelimit.envoy-gateway-system.svc.cluster.local", Certificates: []tls.Certificate{envoy.TLS()}})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	egAskUntil(t, conn, 2)
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		if code, _, err := egAsk(conn); err != nil || code != want {
			t.Fatalf("hit %d: %v, %v; want %v", i+2, code, err, want)
		}
	}
	// quota_mode pushed over xDS: with quota=a over and quota=b not,
	// the request is OK (dropped, quota=a alone would make it
	// OVER_LIMIT).
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK} {
		resp, err := egCheck(conn, [][2]string{{"quota", "a"}}, [][2]string{{"quota", "b"}})
		if err != nil || resp.GetOverallCode() != want {
			t.Fatalf("quota request %d: %v, %v; want %v", i+1, resp, err, want)
		}
		if i == 1 && resp.GetStatuses()[0].GetCode() != pb.RateLimitResponse_OVER_LIMIT {
			t.Fatalf("quota request 2: quota=a %v, want OVER_LIMIT", resp.GetStatuses()[0].GetCode())
		}
	}
	ms.push(t, "envoy-ratelimit", "2", egRules(t, 100))
	egAskUntil(t, conn, 100)

	if code, _, _ := do(t, http.DefaultClient, "GET", r.http+"/healthcheck"); code != http.StatusOK {
		t.Errorf("readiness probe /healthcheck: %d", code)
	}
	mm := metricsAddr.FindStringSubmatch(strings.Join(p.lines(time.Time{}), "\n"))
	if mm == nil {
		t.Fatal("no PROMETHEUS_ADDR listener logged")
	}
	if n := scrape(t, "http://"+mm[1]).count("ratelimit_service_rate_limit_total_hits", `domain="default/eg/http"`); n == 0 {
		t.Errorf("PROMETHEUS_ADDR: no ratelimit_service_rate_limit_total_hits series for the domain")
	}
	ms.mu.Lock()
	nodes := len(ms.nodes)
	node := ms.nodes[0].GetId()
	ms.mu.Unlock()
	if nodes == 0 || node != "envoy-ratelimit" {
		t.Errorf("node %q, want envoy-ratelimit", node)
	}
	if which == "tracing on" {
		eventually(t, time.Minute, func() error {
			if spans.Load() == 0 {
				return fmt.Errorf("no OTLP export at %s/v1/traces", collector.URL)
			}
			return nil
		})
	}
}

// egAsk asks as Envoy does under Envoy Gateway's generated route config
// and returns the code and the limit of the rule's descriptor.
func egAsk(conn *grpc.ClientConn) (pb.RateLimitResponse_Code, uint32, error) {
	key := "httproute/default/backend/rule/0/match/0"
	resp, err := egCheck(conn, [][2]string{{key, key}})
	if err != nil {
		return 0, 0, err
	}
	return resp.GetOverallCode(), resp.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit(), nil
}

// egCheck sends one request with descriptors in Envoy Gateway's domain.
func egCheck(conn *grpc.ClientConn, descriptors ...[][2]string) (*pb.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &pb.RateLimitRequest{Domain: "default/eg/http", HitsAddend: 1}
	for _, d := range descriptors {
		pd := &commonpb.RateLimitDescriptor{}
		for _, e := range d {
			pd.Entries = append(pd.Entries, &commonpb.RateLimitDescriptor_Entry{Key: e[0], Value: e[1]})
		}
		req.Descriptors = append(req.Descriptors, pd)
	}
	return pb.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
}

// egAskUntil asks until the rule's limit is want (the push applies
// asynchronously), for at most a minute: a bound, not a timing assertion.
func egAskUntil(t *testing.T, conn *grpc.ClientConn, want uint32) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		code, limit, err := egAsk(conn)
		if err != nil || limit != want {
			return fmt.Errorf("limit %d (%v, %v), want %d", limit, code, err, want)
		}
		return nil
	})
}
