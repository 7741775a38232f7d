package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/internal/testharness/testcerts"
)

// dockerfileBuild returns the environment assignments and the go command's
// arguments of deploy/Dockerfile's go build line, with the -o output
// replaced by out.
func dockerfileBuild(t *testing.T, dockerfile, out string) (env, args []string) {
	t.Helper()
	src, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(l, "RUN ") && strings.Contains(l, " go build ") {
			line = strings.TrimPrefix(l, "RUN ")
		}
	}
	if line == "" {
		t.Fatalf("%s has no RUN ... go build line", dockerfile)
	}
	words := shellWords(t, line)
	i := 0
	for ; i < len(words) && strings.Contains(words[i], "=") && !strings.HasPrefix(words[i], "-"); i++ {
		env = append(env, words[i])
	}
	if i+1 >= len(words) || words[i] != "go" || words[i+1] != "build" {
		t.Fatalf("Dockerfile build line %q: want [VAR=value...] go build ...", line)
	}
	args = words[i+1:]
	for j := range args {
		if args[j] == "-o" && j+1 < len(args) {
			args[j+1] = out
		}
	}
	return env, args
}

// shellWords splits a Dockerfile RUN line as sh would for the simple
// quoting it uses (double quotes, no escapes or expansions).
func shellWords(t *testing.T, s string) []string {
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for _, c := range s {
		switch {
		case c == '"':
			quoted, in = !quoted, true
		case (c == ' ' || c == '\t') && !quoted:
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case c == '$' || c == '\\' || c == '\'' || c == '&' || c == ';':
			t.Fatalf("Dockerfile build line %q: %q is more shell than this test reads", s, c)
		default:
			w.WriteRune(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// deploymentEnv reads the sluice container's environment from the
// Kubernetes example.
func deploymentEnv(t *testing.T, file string) (command string, env [][2]string, probe string, probePort int) {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name    string   `yaml:"name"`
						Image   string   `yaml:"image"`
						Command []string `yaml:"command"`
						Env     []struct {
							Name  string `yaml:"name"`
							Value string `yaml:"value"`
						} `yaml:"env"`
						ReadinessProbe struct {
							HTTPGet struct {
								Path string `yaml:"path"`
								Port int    `yaml:"port"`
							} `yaml:"httpGet"`
						} `yaml:"readinessProbe"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(src, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if !strings.Contains(c.Image, "sluice") {
			continue
		}
		for _, e := range c.Env {
			env = append(env, [2]string{e.Name, e.Value})
		}
		return strings.Join(c.Command, " "), env, c.ReadinessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Port
	}
	t.Fatalf("%s: no container with sluice's image", file)
	return
}

// freePort returns a loopback port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// TestDockerfileBuild builds the binary exactly as deploy/Dockerfile does
// (its go build line: static, -trimpath, with the VCS revision), checks
// that it is static and says its revision, and runs it as
// envoyproxy/ratelimit's image runs (argv[0] /bin/ratelimit) as a non-root
// user, with the environment of deploy/k8s's Deployment, paths and
// addresses pointed at the test's: TLS on gRPC, rules over xDS with TLS
// (from a management server that is not there: the server starts with no
// rules), statsd to a listener, Redis with a password (REDIS_AUTH), JSON
// logs. /healthcheck answers OK,
// a TLS client gets answers, every log line is a JSON object, and the
// password is in none of them.
func TestDockerfileBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "usr", "local", "bin", "sluice")
	env, args := dockerfileBuild(t, filepath.Join(root, "deploy", "Dockerfile"), bin)
	if !slicesContains(env, "CGO_ENABLED=0") || !slicesContains(args, "-trimpath") {
		t.Fatalf("the Dockerfile builds with %v %v: want CGO_ENABLED=0 and -trimpath", env, args)
	}
	build := exec.Command("go", args...)
	build.Dir = root
	build.Env = append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}

	// Static: no interpreter, no shared library.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter: not static", bin)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", bin, libs)
	}
	f.Close()

	// The version names the commit it was built from.
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("sluice version: %v", err)
	}
	if m := regexp.MustCompile(`revision ([0-9a-f]{40})`).FindSubmatch(out); m == nil {
		// Only a build inside a repository records one (a source
		// tarball has none to record).
		if exec.Command("git", "-C", root, "rev-parse", "HEAD").Run() == nil {
			t.Errorf("sluice version = %q: no revision", out)
		}
	} else if err := exec.Command("git", "-C", root, "cat-file", "-e", string(m[1])+"^{commit}").Run(); err != nil {
		// Others may commit while this test runs: the revision need only
		// be one of the repository's commits.
		t.Errorf("sluice version = %q: revision %s is not a commit of %s (%v)", out, m[1], root, err)
	}
	t.Logf("%s", out)

	// As the image has it: /bin/ratelimit is sluice.
	command, kenv, probe, probePort := deploymentEnv(t, filepath.Join(root, "deploy", "k8s", "ratelimit-deployment.yaml"))
	if command != "/bin/ratelimit" || probe != "/healthcheck" || probePort != 8080 {
		t.Fatalf("the Deployment runs %q and probes %s on %d; want /bin/ratelimit, /healthcheck, 8080", command, probe, probePort)
	}
	ratelimit := filepath.Join(dir, "bin", "ratelimit")
	if err := os.MkdirAll(filepath.Dir(ratelimit), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, ratelimit); err != nil {
		t.Fatal(err)
	}

	// What the Deployment's volumes and neighbours would give.
	data := filepath.Join(dir, "data", "ratelimit", "config")
	certs := filepath.Join(dir, "certs")
	for _, d := range []string{data, certs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rules, err := os.ReadFile(filepath.Join(root, "examples", "rls", "config", "edge.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(data, "edge.yaml"), rules, 0o644)
	ca := testcerts.NewCA("envoy-gateway")
	certFile, keyFile, err := ca.Server("envoy-ratelimit").Write(certs, "tls")
	if err != nil {
		t.Fatal(err)
	}
	caFile, _ := ca.WriteCA(certs, "ca")
	statsd, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer statsd.Close()
	go func() {
		for {
			c, err := statsd.Accept()
			if err != nil {
				return
			}
			go io.Copy(io.Discard, c)
		}
	}()
	const password = "s3cret-hunter2"                   // no colon: REDIS_AUTH would read USER:PASSWORD
	redisURL, redisAuth := "127.0.0.1:"+freePort(t), "" // refused: sluice starts anyway
	if _, cli, err := redistest.Binaries(); err == nil || os.Getenv("CI") == "true" {
		srv := redistest.Start(t)
		// The harness pings without a password: set it once the server is up.
		if out, err := exec.Command(cli, "-p", fmt.Sprint(srv.Port), "config", "set", "requirepass", password).CombinedOutput(); err != nil {
			t.Fatalf("redis-cli config set requirepass: %v\n%s", err, out)
		}
		redisURL, redisAuth = srv.Addr, password
	}
	httpPort, grpcPort := freePort(t), freePort(t)
	overrides := map[string]string{
		"RUNTIME_ROOT": filepath.Join(dir, "data"),
		// No management server answers: sluice starts with no rules and
		// redials (rls/xds's tests serve it rules).
		"CONFIG_GRPC_XDS_SERVER_URL":        "127.0.0.1:" + freePort(t),
		"GRPC_SERVER_TLS_CERT":              certFile,
		"GRPC_SERVER_TLS_KEY":               keyFile,
		"GRPC_SERVER_TLS_CA_CERT":           caFile,
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT":   certFile,
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY":    keyFile,
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": caFile,
		"STATSD_PORT":                       strings.TrimPrefix(statsd.Addr().String(), "127.0.0.1:"),
		"REDIS_URL":                         redisURL,
	}
	added := []string{"HOST=127.0.0.1", "PORT=" + httpPort, "GRPC_HOST=127.0.0.1", "GRPC_PORT=" + grpcPort,
		"STATSD_HOST=127.0.0.1", "LOG_FORMAT=json"}
	if redisAuth != "" {
		added = append(added, "REDIS_AUTH="+redisAuth)
	}
	runEnv := []string{"PATH=/usr/bin:/bin"}
	for _, kv := range kenv {
		v := kv[1]
		if o, ok := overrides[kv[0]]; ok {
			v = o
		}
		runEnv = append(runEnv, kv[0]+"="+v)
	}
	runEnv = append(runEnv, added...)

	// A non-root user: nobody when the test runs as root.
	for _, p := range []string{dir, filepath.Dir(dir)} {
		os.Chmod(p, 0o755)
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			os.Chmod(p, fi.Mode()|0o444)
		}
		return nil
	})
	cmd := exec.Command(ratelimit)
	cmd.Args = []string{"/bin/ratelimit"}
	cmd.Env = runEnv
	cmd.Dir = dir
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		if os.Geteuid() == 0 {
			t.Skipf("cannot run as nobody here: %v", err)
		}
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
		}
	}()

	// The readiness probe.
	deadline := time.Now().Add(time.Minute) // a bound, not a timing assertion
	for {
		resp, err := http.Get("http://127.0.0.1:" + httpPort + "/healthcheck")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(body) == "OK" {
				break
			}
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("/bin/ratelimit exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthcheck never OK:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if os.Geteuid() == 0 {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err == nil && !regexp.MustCompile(`(?m)^Uid:\s+65534\s`).Match(st) {
			t.Errorf("the server does not run as nobody:\n%s", st)
		}
	}

	// Envoy's side: gRPC over TLS, verified with the CA.
	conn, err := grpc.NewClient("127.0.0.1:"+grpcPort, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: ca.Pool(), ServerName: "localhost"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := pb.NewRateLimitServiceClient(conn).ShouldRateLimit(context.Background(), &pb.RateLimitRequest{
		Domain: "edge", HitsAddend: 1,
		Descriptors: []*commonpb.RateLimitDescriptor{{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.1.2.3"}}}},
	})
	if err != nil || resp.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Errorf("ShouldRateLimit over TLS = %v, %v; want OK", resp, err)
	}
	if redisAuth != "" {
		m, _ := http.Get("http://127.0.0.1:" + httpPort + "/metrics")
		body, _ := io.ReadAll(m.Body)
		m.Body.Close()
		if !strings.Contains(string(body), "sluice_store_up 1") {
			t.Errorf("Redis with REDIS_AUTH is not up:\n%s", stderr.String())
		}
	}

	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Errorf("/bin/ratelimit after SIGTERM: %v", err)
	}
	stopped = true
	logs := stderr.String()
	if strings.Contains(logs, password) || strings.Contains(logs, "hunter2") {
		t.Errorf("the logs show the Redis password:\n%s", logs)
	}
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("log line is not JSON (%v): %s", err, sc.Text())
			continue
		}
		if rec["msg"] == nil || rec["level"] == nil || rec["time"] == nil {
			t.Errorf("log line lacks time, level or msg: %s", sc.Text())
		}
		lines++
	}
	for _, want := range []string{`"msg":"sluice rls: listening"`, `"grpc_tls":`, `RUNTIME_ROOT: no effect: not read with CONFIG_TYPE=GRPC_XDS_SOTW`, `GRPC_SERVER_TLS_CA_CERT: no effect`, `"config_type":"xds"`, `"msg":"sluice rls: stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %s", want)
		}
	}
	if lines < 3 || t.Failed() {
		t.Logf("%d log lines:\n%s", lines, logs)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
