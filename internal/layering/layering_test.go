package layering

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sluicehq/sluice"

// allowed is the one table of imports: for every package of the module,
// the packages of the module it may import (directly; its own imports
// then follow their rows). A package not listed fails the test, so a new
// package states its place when it is added. The rows follow the
// layers, top to bottom; "std" marks the packages that may import nothing
// but the standard library and each other (the core).
var allowed = map[string][]string{
	// The command.
	"cmd/sluice": {"gateway", "rls/runner", "httpclient", "hostlimit", "robots", "sim", "rules", "identity", "memstore", "redisstore", "ratelimit", "adaptive", "backoff", "retry", "shed",
		"internal/server/control", "internal/config/didyoumean", "internal/redact", "storeurl", "internal/server/gctune"},
	// The RLS assembled (as gateway is the gateway): flags to store, server,
	// rules' source, gRPC server and listeners. The only importer of the
	// transport.
	"rls/runner": {"rls", "rls/xds", "rules", "memstore", "redisstore", "ratelimit", "storeurl",
		"internal/transport/h2grpc", "internal/server/admin", "internal/server/tlsreload", "internal/server/control", "internal/redact", "ratelimit/header", "internal/server/accesslog", "internal/server/tracing", "internal/server/gctune"},
	// Servers: rules + stores + HTTP/gRPC + metrics; rls and httplimit never
	// import each other.
	"gateway": {"httplimit", "httplimit/action", "identity", "rules", "memstore", "redisstore", "ratelimit", "shed", "inflight", "adaptive",
		"internal/server/admin", "internal/server/eventlog", "storeurl", "internal/server/watch", "internal/config/yamlnode", "internal/config/didyoumean", "internal/server/tlsreload",
		"server/status", "internal/server/control", "internal/redact", "internal/tick", "ratelimit/header", "internal/server/accesslog", "internal/server/tracing"},
	"rls/xds": {"rules"},
	"rls":     {"rules", "ratelimit", "internal/denycache", "internal/server/eventlog", "ratelimit/header", "internal/server/watch", "server/status", "internal/server/control", "internal/tick", "internal/server/accesslog", "internal/server/tracing"},
	// The middleware and who is calling.
	"httplimit": {"httplimit/action", "identity", "rules", "ratelimit", "inflight", "shed", "adaptive", "ratelimit/header", "internal/tick"},
	// Envoy's rate_limits actions and sluice's: request -> descriptor entries.
	"httplimit/action": {"identity", "rules"},
	"identity":         {},
	// The policy file.
	"rules": {"ratelimit", "internal/config/yamlnode"},
	// The client half: imports go straight down and never reach a server
	// or a store but memstore (per-host buckets).
	"httpclient":               {"adaptive", "backoff", "breaker", "hostlimit", "ratelimit", "retry", "robots"},
	"robots":                   {},
	"httpclient/clientmetrics": {"httpclient", "breaker"},
	"hostlimit":                {"adaptive", "backoff", "memstore", "ratelimit", "retry"},
	"retry":                    {"backoff", "internal/tick"},
	"breaker":                  {"backoff"},
	"backoff":                  {},
	"adaptive":                 {},
	// Stores: no client, server or rules package.
	"memstore":   {"ratelimit", "algorithm/gcra", "algorithm/window", "algorithm/slidinglog", "internal/tick"},
	"redisstore": {"memstore", "ratelimit", "algorithm/gcra", "algorithm/window", "internal/transport/rawconn", "internal/redislink", "internal/denycache", "internal/redact", "internal/tick"},
	// The one link to Redis of both Redis stores: breakers, trials, health.
	"internal/redislink": {"ratelimit"},
	// The one cache of denials: the Redis store's DenyCache and the RLS's
	// local over-limit cache.
	"internal/denycache": {"ratelimit"},
	// The store opener, beside the stores: a URL to a server's stores (rate
	// limits, in-flight leases) on one client, for both servers.
	"storeurl": {"memstore", "redisstore", "ratelimit", "inflight", "inflight/redisinflight", "internal/redact"},
	// In-flight limits with leases: the vocabulary and the memory store
	// (core), the Redis store, and their conformance suite.
	"inflight":               {"ratelimit", "internal/tick"},
	"inflight/inflighttest":  {"inflight"},
	"inflight/redisinflight": {"inflight", "ratelimit", "internal/redislink"},
	// Load shedders by priority: the fleet shedder holds inflight leases.
	"shed": {"inflight", "internal/tick"},
	// The algorithms, pure: the vocabulary only.
	"algorithm/gcra":       {"ratelimit"},
	"algorithm/window":     {"ratelimit"},
	"algorithm/slidinglog": {"ratelimit"},
	// The vocabulary and its conformance suite.
	"ratelimit":               {},
	"ratelimit/ratelimittest": {"ratelimit"},
	// Simulations drive the real pure components (and the CPU-bound
	// overload server the real adaptive middleware, httplimit.Adaptive).
	"sim": {"adaptive", "httplimit", "backoff", "inflight", "memstore", "ratelimit", "retry", "shed", "algorithm/gcra", "algorithm/window", "algorithm/slidinglog"},
	// What both servers share over rules: the status page and the Door
	// (a rule and its checks as the page and the admin API see them).
	"server/status": {"internal/server/topk", "internal/server/control", "rules", "ratelimit"},
	// What both servers share, below them and below rules.
	"internal/server/admin":      {},
	"internal/server/gctune":     {},
	"internal/server/accesslog":  {"internal/server/eventlog"},
	"internal/server/tracing":    {"internal/server/accesslog"},
	"internal/server/eventlog":   {"internal/tick"},
	"ratelimit/header":           {"ratelimit"},
	"internal/server/watch":      {"internal/tick"},
	"internal/server/topk":       {},
	"internal/server/control":    {"ratelimit", "internal/server/eventlog", "internal/tick"},
	"internal/server/tlsreload":  {},
	"internal/config/yamlnode":   {"internal/config/didyoumean"},
	"internal/config/didyoumean": {},
	// The loop of every background job.
	"internal/tick":              {},
	"internal/transport/h2grpc":  {"internal/transport/rawconn", "algorithm/gcra", "ratelimit"},
	"internal/transport/rawconn": {},
	// The one redactor, below every layer that handles a URL or a secret.
	"internal/redact": {},
	// Test-only packages and test harnesses.
	"internal/testharness/redistest": {},
	"internal/testharness/twodoors":  {},
	"internal/testharness/testcerts": {},
	"internal/testharness/otlptest":  {},
	"internal/testharness/testidp":   {},
	"internal/testharness/nginxtest": {},
	"internal/testharness/cputime":   {},
	"internal/layering":              {},
	"internal/docsrun":               {},
	"abuse":                          {},

	// An envoyproxy/ratelimit-style server, for the client's tests.
	"internal/testharness/envoystyle": {},
}

// modules is the one table of third-party imports: for every module the
// repository uses, the packages that may import it directly. The core
// (below) imports none; Redis, gRPC and Prometheus stay where they are
// needed, so a user of the middleware or the client pulls in none of them.
var modules = map[string][]string{
	"github.com/redis/rueidis":               {"internal/redislink", "redisstore", "inflight/redisinflight"},
	"github.com/prometheus/client_golang":    {"gateway", "rls", "rls/xds", "rls/runner", "storeurl", "httpclient/clientmetrics", "internal/server/control", "internal/server/tlsreload", "internal/server/admin"},
	"google.golang.org/grpc":                 {"rls/runner", "rls", "rls/xds", "internal/transport/h2grpc", "internal/server/tracing", "internal/testharness/otlptest"},
	"google.golang.org/protobuf":             {"rls", "rls/xds", "internal/transport/h2grpc", "internal/testharness/otlptest"},
	"google.golang.org/genproto/googleapis":  {"rls/xds"},
	"github.com/envoyproxy/go-control-plane": {"rls", "rls/xds"},
	"github.com/lyft/gostats":                {"rls"},
	"go.yaml.in/yaml/v3":                     {"internal/config/yamlnode", "rules", "gateway", "cmd/sluice", "rls/runner"},
	"golang.org/x/net":                       {"rls/runner", "gateway", "rls", "httpclient", "internal/transport/h2grpc"},
	"golang.org/x/term":                      {"cmd/sluice"},
	// OpenTelemetry traces: one package of the servers' (its SDK and OTLP
	// exporters pull in nothing a user of the middleware or the client
	// gets), and the test receiver's collector protos.
	"go.opentelemetry.io/otel":       {"internal/server/tracing"},
	"go.opentelemetry.io/proto/otlp": {"internal/testharness/otlptest"},
	// The client's parsers of what servers send: maintained libraries
	// rather than string splitting of our own.
	"github.com/dunglas/httpsfv":  {"httpclient"},
	"github.com/temoto/robotstxt": {"robots"},
	// JWS verification and JWK parsing for JWTs: a maintained JOSE library
	// rather than a verifier of our own.
	"github.com/go-jose/go-jose/v4": {"identity", "internal/testharness/testidp"},
}

// moduleOf is the row of modules that holds the import path p, or "".
func moduleOf(p string) string {
	best := ""
	for m := range modules {
		if (p == m || strings.HasPrefix(p, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	return best
}

// TestThirdPartyImportsFollowTheTable: every import of a third-party
// package is allowed by its module's row, and every row is used.
func TestThirdPartyImportsFollowTheTable(t *testing.T) {
	used := map[string]bool{}
	for _, p := range packages(t) {
		for _, imp := range p.imports {
			if isStd(imp) || strings.HasPrefix(imp, module+"/") {
				continue
			}
			m := moduleOf(imp)
			if m == "" {
				t.Errorf("%s imports %s, whose module has no row in internal/layering's modules table: add one (and say why the project needs it)", p.path, imp)
				continue
			}
			if !slices.Contains(modules[m], p.path) {
				t.Errorf("%s imports %s, which the row of %s does not allow", p.path, imp, m)
				continue
			}
			used[m+" "+p.path] = true
		}
	}
	for m, importers := range modules {
		for _, p := range importers {
			if !used[m+" "+p] {
				t.Errorf("the modules table lets %s import %s, which it does not: remove it from the row", p, m)
			}
		}
	}
}

// core may import only the standard library (and each other).
var core = []string{"ratelimit", "algorithm/gcra", "algorithm/window", "algorithm/slidinglog", "memstore", "backoff", "retry", "adaptive", "breaker", "inflight"}

type pkg struct {
	path    string   // relative to the module
	imports []string // direct, non-test
	deps    []string // all, non-test
}

// packages lists every package of the module with go list. It fails the
// test (never skips) when go list cannot run: a check that quietly does
// nothing is worse than none.
func packages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", module+"/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), "|")
		if len(parts) != 3 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		p := pkg{path: strings.TrimPrefix(strings.TrimPrefix(parts[0], module), "/")}
		p.imports = strings.Fields(parts[1])
		p.deps = strings.Fields(parts[2])
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

func isStd(p string) bool { return !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") }

// TestImportsFollowTheTable: every package is in the table, and imports
// only the module packages its row allows.
func TestImportsFollowTheTable(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range packages(t) {
		seen[p.path] = true
		row, ok := allowed[p.path]
		if !ok {
			t.Errorf("%s is not in internal/layering's table: add its row (the module packages it may import)", p.path)
			continue
		}
		for _, imp := range p.imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			rel := strings.TrimPrefix(imp, module+"/")
			if !slices.Contains(row, rel) {
				t.Errorf("%s imports %s, which its row of the table does not allow", p.path, rel)
			}
		}
	}
	for path := range allowed {
		if !seen[path] {
			t.Errorf("the table lists %s, which go list does not know", path)
		}
	}
}

// TestCoreIsStandardLibraryOnly: the core packages import only the standard library and each other.
func TestCoreIsStandardLibraryOnly(t *testing.T) {
	byPath := map[string]pkg{}
	for _, p := range packages(t) {
		byPath[p.path] = p
	}
	for _, c := range core {
		p, ok := byPath[c]
		if !ok {
			t.Errorf("core package %s not found", c)
			continue
		}
		for _, d := range p.deps {
			if !isStd(d) && !strings.HasPrefix(d, module+"/") {
				t.Errorf("%s depends on %s: the core must use the standard library only", c, d)
			}
		}
	}
}

// TestReadmeSnippetsAreExamples: every Go block in README.md is the body
// of a runnable example somewhere in the repository (modulo indentation),
// so the README cannot drift from code that compiles and runs.
func TestReadmeSnippetsAreExamples(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go snippets")
	}
	var corpus strings.Builder
	filepath.WalkDir(filepath.Join("..", ".."), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == "bench" || strings.HasPrefix(d.Name(), ".")) && p != filepath.Join("..", "..") {
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, "_test.go") {
			b, _ := os.ReadFile(p)
			corpus.WriteString(normalize(string(b)))
		}
		return nil
	})
	all := corpus.String()
	for i, b := range blocks {
		if !strings.Contains(all, normalize(string(b[1]))) {
			t.Errorf("README.md Go snippet %d is not the body of any example in a _test.go file:\n%s", i+1, b[1])
		}
	}
}

// normalize drops indentation and blank lines.
func normalize(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
