package abuse

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The canary: two halves, so that a password cut by a parser (at an
// unencoded '#', '?' or '%') is caught by either piece.
const (
	canaryA = "C4naryA1"
	canaryB = "S3cretB2"
	canary  = canaryA + canaryB
)

// secretCase is one way of giving sluice a secret: argv, environment and
// files, and whether the process is expected to start.
type secretCase struct {
	name  string
	args  []string
	env   map[string]string
	files map[string]string // name -> content; "$name" in args, env and files is the file's path
	runs  bool              // starts and serves; else exits with an error
	cfg   string            // sluice serve: the gateway config file; args go after it
}

// Attack: make sluice print a secret. A store URL whose password holds an
// unencoded '#' was printed raw in a config error (the redactor cut the
// URL at the '#' and found no password), and `sluice rls` printed the
// value of REDIS_SENTINEL_AUTH when it refused it.
//
// Bound: every URL, DSN and secret-bearing variable passes through one
// redactor (internal/redact) before it reaches an error, a log line, a
// metric label, a status page or --help. Every failure path below, of
// both servers, is run with a canary secret (URL password with unencoded
// '#' and '%', user:password, --store-password, SLUICE_STORE_PASSWORD,
// --store-password-file, REDIS_AUTH, REDIS_SENTINEL_AUTH, TLS key and
// certificate files holding it, an API key file with a key where its hash
// belongs, a short JWT secret and admin token, Redis unreachable at
// start), and no byte
// of stdout, stderr, /metrics, /status, /status.json, /readyz or
// /healthcheck, nor of `sluice check` on the gateway's config, holds
// either half of it. (The process's command line, in
// ps and /debug/pprof/cmdline on the admin listener, shows a
// --store-password given there: --help says to prefer the variable or
// the file.)
func TestSecretsNeverPrinted(t *testing.T) {
	down := "127.0.0.1:1" // nothing listens on port 1 of loopback
	gateway := func(store string) string { return redisGateway(t, store, "allow", 100) }
	cert, _ := selfSigned(t)
	// A key file with the canary in clear and in a PEM block that does
	// not parse.
	key := canary + "\n-----BEGIN PRIVATE KEY-----\nQzRuYXJ5\n-----END PRIVATE KEY-----\n"
	cases := []secretCase{
		{name: "serve/url-hash", cfg: gateway("redis://:" + canaryA + "#" + canaryB + "@" + down + "/0")},
		{name: "serve/url-percent", cfg: gateway("redis://u:" + canaryA + "%zz" + canaryB + "@" + down + "/0")},
		{name: "serve/url-bad-port", cfg: gateway("redis://u:" + canary + "@127.0.0.1:port/0")},
		{name: "serve/url-wrong-scheme", cfg: gateway("http://u:" + canary + "@" + down + "/0")},
		{name: "serve/redis-down", cfg: gateway("redis://u:" + canary + "@" + down + "/0"), runs: true},
		{name: "serve/cluster-down", cfg: gateway("redis-cluster://u:" + canary + "@" + down + ",127.0.0.1:2"), runs: true},
		{name: "serve/tls-key", cfg: tlsGateway(t, cert, key)},
		{name: "serve/upstream-userinfo", cfg: writeFile(t, t.TempDir(), "gateway.yaml", "upstream: http://u:"+canary+"@"+down+"\nroutes: [{path: /}]\n"), runs: true},
		{name: "serve/upstream-wrong-scheme", cfg: writeFile(t, t.TempDir(), "gateway.yaml", "upstream: ftp://u:"+canary+"@"+down+"\nroutes: [{path: /}]\n")},
		{name: "serve/snapshot-on-redis", cfg: gatewayFiles(t, "store: redis://u:"+canary+"@"+down+"/0\nsnapshot: {file: $snap}", map[string]string{"snap": ""})},
		{name: "serve/api-key-unhashed", cfg: gatewayFiles(t, "identity: {api_keys_file: $keys}", map[string]string{"keys": canary + " alice\n"})},
		{name: "serve/jwt-short-secret", cfg: gatewayFiles(t, "identity: {jwt: {alg: HS256, key_file: $jwt}}", map[string]string{"jwt": canary})},
		{name: "serve/admin-token-short", cfg: gatewayFiles(t, "admin_token_file: $tok", map[string]string{"tok": canaryA})},

		{name: "rls/url-hash", args: []string{"--store", "redis://:" + canaryA + "#" + canaryB + "@" + down}},
		{name: "rls/url-percent", args: []string{"--store", "redis://u:" + canaryA + "%zz" + canaryB + "@" + down}},
		{name: "rls/url-bad-port", args: []string{"--store", "redis://u:" + canary + "@127.0.0.1:port"}},
		{name: "rls/redis-down", args: []string{"--store", "redis://u:" + canary + "@" + down, "--on-store-error", "error"}, runs: true},
		{name: "rls/password-env", args: []string{"--store", "redis://" + down}, env: map[string]string{"SLUICE_STORE_PASSWORD": canary}, runs: true},
		{name: "rls/password-file", args: []string{"--store", "redis://" + down, "--store-password-file", "$pw"}, files: map[string]string{"pw": canary + "\n"}, runs: true},
		{name: "rls/password-twice", args: []string{"--store", "redis://u:x@" + down}, env: map[string]string{"SLUICE_STORE_PASSWORD": canary}},
		{name: "rls/password-memory", env: map[string]string{"SLUICE_STORE_PASSWORD": canary}},
		{name: "rls/redis-auth", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": down, "REDIS_AUTH": "user:" + canary,
			"REDIS_PERSECOND_AUTH": canary}, runs: true},
		{name: "rls/redis-auth-bad-url", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis://:" + canary + "@" + down, "REDIS_AUTH": canary}},
		{name: "rls/sentinel-auth", env: map[string]string{"REDIS_SENTINEL_AUTH": canary}},
		{name: "rls/tls-files", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": down, "REDIS_TLS": "true", "REDIS_AUTH": canary,
			"REDIS_TLS_CLIENT_CERT": "$cert", "REDIS_TLS_CLIENT_KEY": "$key"},
			files: map[string]string{"cert": cert, "key": key}},
		{name: "rls/admin-token-short", env: map[string]string{"SLUICE_ADMIN_TOKEN": canaryA}},
		{name: "rls/admin-token-file-short", args: []string{"--admin-token-file", "$tok"}, files: map[string]string{"tok": canaryA + "\n"}},
		{name: "rls/password-env-typo", env: map[string]string{"SLUICE_STORE_PASSWROD": canary}},
		{name: "rls/help", args: []string{"--help"}, env: map[string]string{"SLUICE_STORE_PASSWORD": canary, "REDIS_AUTH": canary}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := runSecretCase(t, tc)
			for _, s := range []string{canaryA, canaryB} {
				if i := strings.Index(out, s); i >= 0 {
					t.Errorf("the output holds the secret %q: …%s…", s, out[max(0, i-200):min(len(out), i+100)])
				}
			}
		})
	}
}

// runSecretCase runs tc and returns every byte it wrote, with its HTTP
// answers when it runs.
func runSecretCase(t *testing.T, tc secretCase) string {
	dir := t.TempDir()
	paths := map[string]string{}
	for name := range tc.files {
		paths["$"+name] = dir + "/" + name
	}
	expand := func(s string) string {
		for k, v := range paths {
			s = strings.ReplaceAll(s, k, v)
		}
		return s
	}
	for name, content := range tc.files {
		writeFile(t, dir, name, content)
	}
	for k, v := range tc.env {
		t.Setenv(k, expand(v))
	}
	args := make([]string, len(tc.args))
	for i, a := range tc.args {
		args[i] = expand(a)
	}
	serve := strings.HasPrefix(tc.name, "serve/")
	if serve {
		args = append([]string{"--config", tc.cfg}, args...)
	} else if !strings.Contains(strings.Join(args, " "), "--help") {
		writeFile(t, dir, "rules.yaml", "domain: abuse\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100}\n")
		args = append([]string{"--config-dir", dir}, args...)
	}
	checked := ""
	if serve {
		// sluice check reads the same config: its problems, the same.
		out, _ := exec.Command(sluiceBinary(t), "check", tc.cfg).CombinedOutput()
		checked = "sluice check:\n" + string(out)
	}
	if !tc.runs {
		cmd := "rls"
		if serve {
			cmd = "serve"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, sluiceBinary(t), append([]string{cmd}, args...)...)
		setDeathSignal(c)
		out, err := c.CombinedOutput()
		if ctx.Err() != nil || (err == nil && !strings.Contains(tc.name, "help")) {
			t.Fatalf("sluice %s %v: %v, want it to exit with an error:\n%s", cmd, args, err, out)
		}
		return string(out) + checked
	}
	var p *proc
	var pages []string
	if serve {
		g := startServe(t, args[1], args[2:]...)
		p = g.proc
		do(t, client(t), "GET", g.url+"/x")
		pages = []string{g.admin + "/metrics", g.admin + "/readyz", g.admin + "/status", g.admin + "/status.json"}
	} else {
		r := startRLS(t, args[1], args[2:]...)
		p = r.proc
		r.tryDecide(client(t), "abuse", 1, [][2]string{{"k", "v"}})
		pages = []string{r.http + "/metrics", r.http + "/healthcheck", r.http + "/status", r.http + "/status.json"}
	}
	var b strings.Builder
	c := client(t)
	for _, u := range pages {
		res, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusNotFound {
			t.Errorf("GET %s: 404", u)
		}
		fmt.Fprintf(&b, "GET %s: %d\n%s\n", u, res.StatusCode, body)
	}
	p.stop()
	return p.output() + b.String() + checked
}

// tlsGateway writes a gateway config serving TLS with the certificate
// and key given (PEM).
func tlsGateway(t *testing.T, cert, key string) string {
	return gatewayFiles(t, "tls: {cert_file: $cert, key_file: $key}", map[string]string{"cert": cert, "key": key})
}

// gatewayFiles writes a gateway config of one route to builtin:echo with
// the settings of yaml, in which "$name" is the path of a file written
// with files[name].
func gatewayFiles(t *testing.T, yaml string, files map[string]string) string {
	dir := t.TempDir()
	for name, content := range files {
		yaml = strings.ReplaceAll(yaml, "$"+name, writeFile(t, dir, name, content))
	}
	return writeFile(t, dir, "gateway.yaml", "upstream: builtin:echo\nroutes: [{path: /}]\n"+yaml+"\n")
}

// selfSigned returns a PEM certificate for 127.0.0.1 and its PEM key.
func selfSigned(t *testing.T) (cert, key string) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}
