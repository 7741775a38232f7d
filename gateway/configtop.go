package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
	"github.com/sluicehq/sluice/internal/redact"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rules"
	"github.com/sluicehq/sluice/storeurl"
)

// top is the decoding of a config's top level: the Config being filled,
// and what the checks across keys need once every key is read.
type top struct {
	d    *decoder
	c    *Config
	root *yaml.Node
	rel  func(string) string // a file name relative to the config's directory

	cfgs                   []*rules.Config // from rules_files, then the inline rules
	rulesNode, routesNode  *yaml.Node
	domainLine             int
	disabledLines          []int
	storeErrLine, failLine int // on_store_error's and fail_closed: true's
	hasRulesFiles          bool
	h2cLine                int // http2.h2c: true's
}

// topKeys is the gateway config's top level: one small decoder a key.
// Sections with structure of their own (identity, tls, routes, shedding,
// ...) have decoders of their own.
var topKeys = map[string]func(t *top, v *yaml.Node){
	"listen":         func(t *top, v *yaml.Node) { t.c.Listen = t.d.str(v, "listen") },
	"admin_listen":   func(t *top, v *yaml.Node) { t.c.AdminListen = t.d.str(v, "admin_listen") },
	"tls":            func(t *top, v *yaml.Node) { t.c.TLS = t.d.tlsSection(v, t.rel) },
	"http2":          func(t *top, v *yaml.Node) { t.h2cLine = t.d.http2(v, &t.c.HTTP2) },
	"proxy_protocol": func(t *top, v *yaml.Node) { t.c.ProxyProtocol = t.d.proxyProtocol(v) },
	"upstream":       (*top).upstream,
	"upstreams":      (*top).upstreams,
	"access_log":     (*top).accessLog,
	"tracing":        (*top).tracingSection,
	"upstream_timeout": func(t *top, v *yaml.Node) {
		t.c.UpstreamTimeout = t.d.duration(v, "upstream_timeout")
	},
	"upstream_idle_connections": func(t *top, v *yaml.Node) {
		t.c.UpstreamIdleConnections = int(t.d.integer(v, "upstream_idle_connections", 1, 1<<16))
	},
	"shutdown_timeout": func(t *top, v *yaml.Node) { t.c.ShutdownTimeout = t.d.duration(v, "shutdown_timeout") },
	"store":            (*top).store,
	"max_keys":         func(t *top, v *yaml.Node) { t.c.MaxKeys = int(t.d.integer(v, "max_keys", 1024, 1<<30)) },
	"snapshot": func(t *top, v *yaml.Node) {
		t.d.fields(v, "snapshot", map[string]func(k, v *yaml.Node){
			"file":     func(k, v *yaml.Node) { t.c.SnapshotFile = t.rel(t.d.str(v, "snapshot.file")) },
			"interval": func(k, v *yaml.Node) { t.c.SnapshotEvery = t.d.duration(v, "snapshot.interval") },
			"journal":  func(k, v *yaml.Node) { t.c.Journal = t.d.boolean(v, "snapshot.journal") },
			"journal_interval": func(k, v *yaml.Node) {
				t.c.JournalEvery = t.d.boundedDuration(v, "snapshot.journal_interval", time.Millisecond, time.Minute)
			},
		})
	},
	"headers":        (*top).headers,
	"on_store_error": (*top).onStoreError,
	"fail_closed": func(t *top, v *yaml.Node) {
		// Before on_store_error: fail_closed: true answered 503, which is
		// on_store_error: error.
		if t.d.boolean(v, "fail_closed") {
			t.failLine = v.Line
		}
	},
	"pprof":               func(t *top, v *yaml.Node) { t.c.Pprof = t.d.boolean(v, "pprof") },
	"rate_limit_endpoint": (*top).rateLimitEndpoint,
	"admin_token_file":    func(t *top, v *yaml.Node) { t.c.AdminTokenFile = t.rel(t.d.str(v, "admin_token_file")) },
	"reset_jitter":        (*top).resetJitter,
	"shadow":              func(t *top, v *yaml.Node) { t.c.Shadow = t.d.boolean(v, "shadow") },
	"disabled":            func(t *top, v *yaml.Node) { t.c.Disabled = t.d.boolean(v, "disabled") },
	"disabled_rules": func(t *top, v *yaml.Node) {
		t.d.list(v, "disabled_rules", func(_ int, v *yaml.Node, path string) {
			t.c.DisabledRules = append(t.c.DisabledRules, t.d.str(v, path))
			t.disabledLines = append(t.disabledLines, v.Line)
		})
	},
	"domain":            func(t *top, v *yaml.Node) { t.c.Domain, t.domainLine = t.d.str(v, "domain"), v.Line },
	"identity":          func(t *top, v *yaml.Node) { t.d.identity(v, &t.c.Identity, t.rel) },
	"connections":       func(t *top, v *yaml.Node) { t.d.connections(v, "connections", &t.c.Connections) },
	"admin_connections": func(t *top, v *yaml.Node) { t.d.connections(v, "admin_connections", &t.c.AdminConnections) },
	"routes":            func(t *top, v *yaml.Node) { t.routesNode = v },
	"rules":             func(t *top, v *yaml.Node) { t.rulesNode = v },
	"in_flight":         func(t *top, v *yaml.Node) { t.c.InFlight = t.d.inFlight(v, "in_flight", false) },
	"shedding":          func(t *top, v *yaml.Node) { t.c.Shedding = t.d.shedding(v) },
	"denial":            func(t *top, v *yaml.Node) { t.c.Denial = t.d.denial(v, "denial") },
	"rules_files":       (*top).rulesFiles,
	"decision":          (*top).decision, // decisionconfig.go
}

func (d *decoder) parse(data []byte) *Config {
	root := d.walker().Root(data, "at least upstream, routes and rules")
	if root == nil {
		return nil
	}
	t := d.newTop(root)
	handlers := make(map[string]func(k, v *yaml.Node), len(topKeys))
	for key, decode := range topKeys {
		handlers[key] = func(_, v *yaml.Node) { decode(t, v) }
	}
	d.fields(root, "", handlers)
	if t.c.Upstream == "" && len(t.c.Upstreams) == 0 && !t.c.Decision.All() {
		d.add(root.Line, "upstream", "missing upstream (a URL, or %s; or upstreams, named by the routes)", BuiltinEcho)
	}
	t.failClosed()
	t.ruleSet(data)
	t.domain()
	t.knownDisabledRules()
	t.defaults()
	t.upstreamDefaults()
	t.routes()
	t.checkDecision()
	return t.c
}

// newTop starts a Config with every default.
func (d *decoder) newTop(root *yaml.Node) *top {
	dir := filepath.Dir(d.file)
	t := &top{d: d, root: root, rel: func(p string) string {
		if p == "" || filepath.IsAbs(p) || d.readFile != nil {
			return p
		}
		return filepath.Join(dir, p)
	}}
	t.c = &Config{
		readFile: d.readFile,
		File:     d.file, Listen: DefaultListen, AdminListen: DefaultAdminListen,
		UpstreamTimeout: DefaultUpstreamTimeout, ShutdownTimeout: DefaultShutdownTimeout,
		Store: "memory", SnapshotEvery: DefaultSnapshotEvery, Journal: true, JournalEvery: memstore.DefaultJournalInterval, OnStoreError: ratelimit.FailAllow,
		Identity: IdentityConfig{ForwardUserHeader: DefaultForwardUserHeader,
			ForwardTierHeader: DefaultForwardTierHeader, ForwardKindHeader: DefaultForwardKindHeader},
		UpstreamIdleConnections: DefaultUpstreamIdleConnections,
	}
	return t
}

func (t *top) upstream(v *yaml.Node) { t.c.Upstream = t.d.upstreamURL(v, "upstream") }

// storeSchemes are the URL schemes of a store other than memory.
var storeSchemes = []string{"redis", "rediss", "redis-cluster", "rediss-cluster", "redis-sentinel", "unix"}

func (t *top) store(v *yaml.Node) {
	t.c.Store = t.d.str(v, "store")
	if t.c.Store == "memory" {
		return
	}
	u, err := url.Parse(t.c.Store)
	if errors.Is(redact.Error(t.c.Store, err), redact.ErrUnencoded) {
		t.d.add(v.Line, "store", "%q: %v", redact.URL(t.c.Store), redact.ErrUnencoded)
		return
	} else if err != nil || !slices.Contains(storeSchemes, u.Scheme) {
		t.d.add(v.Line, "store", "want memory or a redis://, rediss://, redis-cluster://, rediss-cluster://, redis-sentinel:// or unix:// URL, got %q", redact.URL(t.c.Store))
		return
	}
	for _, w := range storeurl.Warnings(t.c.Store) { // lease=, prefetch='s old spelling
		t.c.Warnings = append(t.c.Warnings, rules.Problem{File: t.d.file, Line: v.Line, Path: "store", Msg: "warning: " + w}.Error())
	}
}

func (t *top) headers(v *yaml.Node) {
	m, err := header.ParseMode(t.d.str(v, "headers"))
	if err != nil {
		t.d.add(v.Line, "headers", "want ietf, legacy or opaque, got %s", yamlnode.Kind(v))
	}
	t.c.Headers = m
}

func (t *top) onStoreError(v *yaml.Node) {
	p, err := ratelimit.ParseFailurePolicy(t.d.str(v, "on_store_error"))
	if err != nil {
		t.d.add(v.Line, "on_store_error", "want allow, deny, local or error, got %s", yamlnode.Kind(v))
	}
	t.c.OnStoreError, t.storeErrLine = p, v.Line
}

func (t *top) rateLimitEndpoint(v *yaml.Node) {
	p := t.d.str(v, "rate_limit_endpoint")
	t.c.RateLimitEndpoint = p
	if p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsAny(p, " {}?#") || path.Clean(p) != p) {
		t.d.add(v.Line, "rate_limit_endpoint", "want a clean absolute path such as /rate_limit, got %q", p)
	}
}

func (t *top) resetJitter(v *yaml.Node) {
	f, err := strconv.ParseFloat(t.d.str(v, "reset_jitter"), 64)
	if err != nil || f < 0 || f > 1 || v.Tag == "!!str" {
		t.d.add(v.Line, "reset_jitter", "want a fraction of the window from 0 to 1, such as 0.1, got %s", yamlnode.Kind(v))
		return
	}
	t.c.ResetJitter = f
}

func (t *top) rulesFiles(v *yaml.Node) {
	t.hasRulesFiles = true
	t.d.list(v, "rules_files", func(_ int, v *yaml.Node, path string) {
		name := t.rel(t.d.str(v, path))
		data, err := t.d.read(name)
		if err != nil {
			t.d.add(v.Line, path, "%v", err)
			return
		}
		rc, err := rules.Parse(name, data)
		if err != nil {
			t.d.rulesErrors(err, "")
			return
		}
		t.cfgs = append(t.cfgs, rc)
	})
}

// failClosed turns the old fail_closed: true into on_store_error: error,
// refusing a file that says both and disagrees.
func (t *top) failClosed() {
	if t.failLine == 0 {
		return
	}
	if t.storeErrLine > 0 && t.c.OnStoreError != ratelimit.FailError {
		t.d.add(t.failLine, "fail_closed", "fail_closed: true is on_store_error: error; the file also says on_store_error: %s", t.c.OnStoreError)
	}
	t.c.OnStoreError = ratelimit.FailError
}

// ruleSet joins the rules files and the inline rules into one set.
func (t *top) ruleSet(data []byte) {
	if t.rulesNode != nil {
		if rc := t.d.inlineRules(t.root, t.rulesNode, data); rc != nil {
			t.cfgs = append(t.cfgs, rc)
		}
	}
	if len(t.cfgs) == 0 {
		return
	}
	set, err := rules.NewSet(t.cfgs...)
	if err != nil {
		t.d.rulesErrors(err, "")
		return
	}
	for _, p := range set.Warnings() { // lease: true, prefetch's old spelling
		if p.File == t.d.file {
			p.Path = yamlnode.Join("rules", p.Path)
		}
		p.Msg = "warning: " + p.Msg
		t.c.Warnings = append(t.c.Warnings, p.Error())
	}
	t.c.Rules = set
}

// domain is the rules domain the gateway uses: the one there is, or the
// one the file names.
func (t *top) domain() {
	c := t.c
	switch {
	case c.Domain == "" && len(t.cfgs) == 1:
		c.Domain = t.cfgs[0].Domain
	case c.Domain == "" && len(t.cfgs) > 1:
		t.d.add(t.root.Line, "domain", "several rules domains: say which one the gateway uses")
	case c.Domain != "" && c.Rules != nil && c.Rules.Config(c.Domain) == nil:
		t.d.add(t.domainLine, "domain", "no rules for domain %q", c.Domain)
	}
}

// knownDisabledRules: every name in disabled_rules is a rule's.
func (t *top) knownDisabledRules() {
	if t.c.Rules == nil {
		return
	}
	known := map[string]bool{}
	for _, dom := range t.c.Rules.Domains() {
		for _, r := range t.c.Rules.Config(dom).Rules() {
			known[r.Name] = true
		}
	}
	for i, n := range t.c.DisabledRules {
		if !known[n] {
			t.d.add(t.disabledLines[i], fmt.Sprintf("disabled_rules[%d]", i), "no rule named %q", n)
		}
	}
}

func (t *top) defaults() {
	c := t.c
	if c.MaxKeys == 0 {
		c.MaxKeys = memstore.DefaultMaxKeys
	}
	if c.SnapshotFile != "" && c.Store != "memory" {
		t.d.add(t.root.Line, "snapshot", "snapshots are for the memory store; %s keeps its own state", redact.URL(c.Store))
	}
	c.Connections = c.Connections.withDefaults(DefaultConnections())
	c.AdminConnections = c.AdminConnections.withDefaults(DefaultAdminConnections())
	if c.HTTP2.MaxConcurrentStreams == 0 {
		c.HTTP2.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if c.HTTP2.H2C && c.TLS != nil {
		t.d.add(t.h2cLine, "http2.h2c", "h2c is HTTP/2 in cleartext; over tls: HTTP/2 is offered by ALPN (http2.enabled)")
	}
}

// routes decodes the routes and checks them against each other and
// against the rules.
func (t *top) routes() {
	d, c, n := t.d, t.c, t.routesNode
	if n == nil {
		d.add(t.root.Line, "routes", "missing routes")
		return
	}
	var lines []int
	before := len(d.errs)
	d.list(n, "routes", func(i int, v *yaml.Node, path string) {
		c.Routes = append(c.Routes, d.route(v, path, c))
		lines = append(lines, v.Line)
	})
	if len(d.errs) == before { // conflicts only between routes that are well formed
		for _, p := range checkRoutes(c.Routes) {
			d.add(lines[p.route], fmt.Sprintf("routes[%d]", p.route), "%s", p.msg)
		}
	}
	d.checkConcurrency(c, lines)
	if len(c.Routes) == 0 && (n.Kind == yaml.SequenceNode || n.Tag == "!!null") {
		d.add(n.Line, "routes", "no routes")
	}
	limited := false
	for _, r := range c.Routes {
		limited = limited || len(r.Descriptors) > 0
	}
	if limited && c.Rules == nil && t.rulesNode == nil && !t.hasRulesFiles {
		d.add(n.Line, "routes", "routes have rate_limits but there are no rules (rules or rules_files)")
	}
}
