package gateway

import (
	"bytes"
	"embed"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/yamlnode"
	"github.com/sluicehq/sluice/rules"
)

// Defaults of the config file.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultAdminListen     = "127.0.0.1:9090"
	DefaultUpstreamTimeout = 30 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultSnapshotEvery   = time.Minute
	// BuiltinEcho is the upstream that answers every request itself with a
	// JSON echo of it: a demo API with nothing else to run.
	BuiltinEcho = "builtin:echo"
)

// Config is a parsed gateway config file. Parse fills every default, so
// the zero value of a field below only appears when the file says so.
type Config struct {
	File            string        // the file name given to Parse
	Listen          string        // listen: the public address
	AdminListen     string        // admin_listen: /metrics, /healthz, /readyz
	Upstream        string        // upstream: a URL or builtin:echo
	UpstreamTimeout time.Duration // upstream_timeout: per request, unless a route says otherwise
	ShutdownTimeout time.Duration // shutdown_timeout: how long in-flight requests may drain
	Store           string        // store: memory, or a redis://, rediss:// or redis-cluster:// URL
	SnapshotFile    string        // snapshot.file: the memory store's state across restarts ("" none)
	SnapshotEvery   time.Duration // snapshot.interval
	Headers         httplimit.HeaderMode
	FailClosed      bool     // fail_closed: 503 when the store fails (default: fail open)
	Shadow          bool     // shadow: every rule in shadow mode
	Disabled        bool     // disabled: the kill switch for all limiting
	DisabledRules   []string // disabled_rules: the kill switch per rule (by name)
	Domain          string   // domain: the rules domain; defaults to the only one
	Pprof           bool     // pprof: serve net/http/pprof on the admin listener
	Identity        IdentityConfig
	Routes          []Route
	Rules           *rules.Set

	// readFile reads the files the config names (the embedded files for
	// Default); nil means os.ReadFile.
	readFile func(string) ([]byte, error)
}

func (c *Config) read(name string) ([]byte, error) {
	if c.readFile != nil {
		return c.readFile(name)
	}
	return os.ReadFile(name)
}

//go:embed default.yaml default-keys.txt
var defaultFS embed.FS

// DefaultYAML is the built-in config that `sluice serve` runs without
// --config: the builtin:echo upstream, the memory store, an anonymous
// per-IP token bucket and a demo API key ("sluice-demo-key", user "demo")
// with a per-user token bucket.
func DefaultYAML() []byte {
	b, _ := defaultFS.ReadFile("default.yaml")
	return b
}

// Default returns the built-in config (see DefaultYAML), parsed.
func Default() (*Config, error) {
	cfg, err := parse("default.yaml", DefaultYAML(), defaultFS.ReadFile)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// IdentityConfig is the identity section: who the caller is. Nothing is
// trusted by default: no proxies, no keys, no header.
type IdentityConfig struct {
	TrustedProxies []netip.Prefix // trusted_proxies: peers whose X-Forwarded-For/Forwarded is read
	IPv6Prefix     int            // ipv6_prefix: limit IPv6 clients per prefix (e.g. 64); 0 per address
	APIKeysFile    string         // api_keys_file: SHA-256 hashes of keys, user and tier
	UserHeader     string         // user_header: a user ID set by a trusted proxy
	TierHeader     string         // tier_header: the tier, read with user_header
	JWT            *JWTConfig     // jwt
}

// JWTConfig is the jwt subsection of identity.
type JWTConfig struct {
	Algorithm string        // alg: HS256, RS256 or ES256
	KeyFile   string        // key_file: the HMAC secret or the PEM public key
	UserClaim string        // user_claim: default "sub"
	TierClaim string        // tier_claim: optional
	Issuer    string        // issuer: optional, checked when set
	Audience  string        // audience: optional, checked when set
	Leeway    time.Duration // leeway: clock skew allowed on exp and nbf
}

// Route is one entry of routes: requests whose path starts with Path (and
// whose method is in Methods, when set) are limited by its descriptors and
// proxied upstream.
type Route struct {
	Path            string
	Methods         []string
	UpstreamTimeout time.Duration
	Cost            int64
	CostHeader      string
	Descriptors     []httplimit.Descriptor
}

// ParseFile reads and parses a config file.
func ParseFile(filename string) (*Config, error) {
	data, err := os.ReadFile(filename)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return Parse(filename, data)
}

// Parse parses and validates a gateway config. Relative file names in it
// (rules_files, api_keys_file, snapshot.file, jwt.key_file) are relative
// to filename's directory. The error, when not nil, is a *rules.Errors
// listing every problem as "file:line: path: message".
func Parse(filename string, data []byte) (*Config, error) {
	return parse(filename, data, nil)
}

func parse(filename string, data []byte, readFile func(string) ([]byte, error)) (*Config, error) {
	d := &decoder{file: filename, readFile: readFile}
	cfg := d.parse(data)
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool {
			if d.errs[i].File != d.errs[j].File {
				return d.errs[i].File < d.errs[j].File
			}
			return d.errs[i].Line < d.errs[j].Line
		})
		errs := d.errs
		return nil, &errs
	}
	return cfg, nil
}

func (d *decoder) parse(data []byte) *Config {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		d.yamlError(err)
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		d.add(0, "", "empty file (want at least upstream, routes and rules)")
		return nil
	}
	root := d.deref(doc.Content[0])
	if root == nil {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		d.add(root.Line, "", "want a mapping, got %s", yamlnode.Kind(root))
		return nil
	}
	dir := filepath.Dir(d.file)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) || d.readFile != nil {
			return p
		}
		return filepath.Join(dir, p)
	}
	c := &Config{
		readFile: d.readFile,
		File:     d.file, Listen: DefaultListen, AdminListen: DefaultAdminListen,
		UpstreamTimeout: DefaultUpstreamTimeout, ShutdownTimeout: DefaultShutdownTimeout,
		Store: "memory", SnapshotEvery: DefaultSnapshotEvery,
	}
	var cfgs []*rules.Config
	var rulesNode, routesNode *yaml.Node
	var domainLine int
	var disabledLines []int
	hasRulesFiles := false
	d.fields(root, "", map[string]func(k, v *yaml.Node){
		"listen":       func(k, v *yaml.Node) { c.Listen = d.str(v, "listen") },
		"admin_listen": func(k, v *yaml.Node) { c.AdminListen = d.str(v, "admin_listen") },
		"upstream": func(k, v *yaml.Node) {
			c.Upstream = d.str(v, "upstream")
			if c.Upstream != BuiltinEcho {
				u, err := url.Parse(c.Upstream)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					d.add(v.Line, "upstream", "want an http:// or https:// URL or %s, got %q", BuiltinEcho, c.Upstream)
				}
			}
		},
		"upstream_timeout": func(k, v *yaml.Node) { c.UpstreamTimeout = d.duration(v, "upstream_timeout") },
		"shutdown_timeout": func(k, v *yaml.Node) { c.ShutdownTimeout = d.duration(v, "shutdown_timeout") },
		"store": func(k, v *yaml.Node) {
			c.Store = d.str(v, "store")
			if c.Store != "memory" {
				u, err := url.Parse(c.Store)
				if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "redis-cluster" && u.Scheme != "unix") {
					d.add(v.Line, "store", "want memory or a redis://, rediss://, redis-cluster:// or unix:// URL, got %q", c.Store)
				}
			}
		},
		"snapshot": func(k, v *yaml.Node) {
			d.fields(v, "snapshot", map[string]func(k, v *yaml.Node){
				"file":     func(k, v *yaml.Node) { c.SnapshotFile = rel(d.str(v, "snapshot.file")) },
				"interval": func(k, v *yaml.Node) { c.SnapshotEvery = d.duration(v, "snapshot.interval") },
			})
		},
		"headers": func(k, v *yaml.Node) {
			m, err := httplimit.ParseHeaderMode(d.str(v, "headers"))
			if err != nil {
				d.add(v.Line, "headers", "want ietf, legacy or opaque, got %s", yamlnode.Kind(v))
			}
			c.Headers = m
		},
		"fail_closed": func(k, v *yaml.Node) { c.FailClosed = d.boolean(v, "fail_closed") },
		"pprof":       func(k, v *yaml.Node) { c.Pprof = d.boolean(v, "pprof") },
		"shadow":      func(k, v *yaml.Node) { c.Shadow = d.boolean(v, "shadow") },
		"disabled":    func(k, v *yaml.Node) { c.Disabled = d.boolean(v, "disabled") },
		"disabled_rules": func(k, v *yaml.Node) {
			d.list(v, "disabled_rules", func(_ int, v *yaml.Node, path string) {
				c.DisabledRules = append(c.DisabledRules, d.str(v, path))
				disabledLines = append(disabledLines, v.Line)
			})
		},
		"domain":   func(k, v *yaml.Node) { c.Domain, domainLine = d.str(v, "domain"), v.Line },
		"identity": func(k, v *yaml.Node) { d.identity(v, &c.Identity, rel) },
		"routes":   func(k, v *yaml.Node) { routesNode = v },
		"rules":    func(k, v *yaml.Node) { rulesNode = v },
		"rules_files": func(k, v *yaml.Node) {
			hasRulesFiles = true
			d.list(v, "rules_files", func(_ int, v *yaml.Node, path string) {
				name := rel(d.str(v, path))
				data, err := d.read(name)
				if err != nil {
					d.add(v.Line, path, "%v", err)
					return
				}
				rc, err := rules.Parse(name, data)
				if err != nil {
					d.rulesErrors(err, "")
					return
				}
				cfgs = append(cfgs, rc)
			})
		},
	})
	if c.Upstream == "" {
		d.add(root.Line, "upstream", "missing upstream (a URL, or %s)", BuiltinEcho)
	}
	if rulesNode != nil {
		if rc := d.inlineRules(root, rulesNode, data); rc != nil {
			cfgs = append(cfgs, rc)
		}
	}
	if len(cfgs) > 0 {
		set, err := rules.NewSet(cfgs...)
		if err != nil {
			d.rulesErrors(err, "")
		}
		c.Rules = set
	}
	switch {
	case c.Domain == "" && len(cfgs) == 1:
		c.Domain = cfgs[0].Domain
	case c.Domain == "" && len(cfgs) > 1:
		d.add(root.Line, "domain", "several rules domains: say which one the gateway uses")
	case c.Domain != "" && c.Rules != nil && c.Rules.Config(c.Domain) == nil:
		d.add(domainLine, "domain", "no rules for domain %q", c.Domain)
	}
	if c.Rules != nil {
		known := map[string]bool{}
		for _, dom := range c.Rules.Domains() {
			for _, r := range c.Rules.Config(dom).Rules() {
				known[r.Name] = true
			}
		}
		for i, n := range c.DisabledRules {
			if !known[n] {
				d.add(disabledLines[i], fmt.Sprintf("disabled_rules[%d]", i), "no rule named %q", n)
			}
		}
	}
	if c.SnapshotFile != "" && c.Store != "memory" {
		d.add(root.Line, "snapshot", "snapshots are for the memory store; %s keeps its own state", c.Store)
	}
	if routesNode == nil {
		d.add(root.Line, "routes", "missing routes")
	} else {
		d.list(routesNode, "routes", func(i int, v *yaml.Node, path string) {
			c.Routes = append(c.Routes, d.route(v, path, c))
		})
		if len(c.Routes) == 0 && (routesNode.Kind == yaml.SequenceNode || routesNode.Tag == "!!null") {
			d.add(routesNode.Line, "routes", "no routes")
		}
		limited := false
		for _, r := range c.Routes {
			limited = limited || len(r.Descriptors) > 0
		}
		if limited && c.Rules == nil && rulesNode == nil && !hasRulesFiles {
			d.add(routesNode.Line, "routes", "routes have rate_limits but there are no rules (rules or rules_files)")
		}
	}
	return c
}

// inlineRules parses the rules section with the rules package. It hands
// rules.Parse the section's own text, with the lines before it blanked and
// its first line's key replaced by spaces, so that rules' problems carry
// the config file's line numbers.
func (d *decoder) inlineRules(root, v *yaml.Node, data []byte) *rules.Config {
	if v.Kind != yaml.MappingNode {
		d.add(v.Line, "rules", "want a mapping with domain and descriptors (an envoyproxy/ratelimit config), got %s", yamlnode.Kind(v))
		return nil
	}
	end := -1 // the first line after the section
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i]; k.Line > v.Line && (end < 0 || k.Line < end) {
			end = k.Line
		}
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	var b bytes.Buffer
	for i, l := range lines {
		n := i + 1
		switch {
		case n < v.Line || (end > 0 && n >= end):
			b.WriteByte('\n')
		case n == v.Line:
			col := min(max(v.Column-1, 0), len(l))
			b.Write(bytes.Repeat([]byte(" "), col))
			b.Write(l[col:])
		default:
			b.Write(l)
		}
	}
	rc, err := rules.Parse(d.file, b.Bytes())
	if err != nil {
		d.rulesErrors(err, "rules")
		return nil
	}
	return rc
}

// rulesErrors adds the problems of a rules error, their paths under
// prefix.
func (d *decoder) rulesErrors(err error, prefix string) {
	var errs *rules.Errors
	if !asRulesErrors(err, &errs) {
		d.add(0, prefix, "%v", err)
		return
	}
	for _, p := range *errs {
		if prefix != "" && p.File == d.file {
			p.Path = yamlnode.Join(prefix, p.Path)
		}
		d.errs = append(d.errs, p)
	}
}

func (d *decoder) identity(n *yaml.Node, ic *IdentityConfig, rel func(string) string) {
	d.fields(n, "identity", map[string]func(k, v *yaml.Node){
		"trusted_proxies": func(k, v *yaml.Node) {
			d.list(v, "identity.trusted_proxies", func(_ int, v *yaml.Node, path string) {
				s := d.str(v, path)
				p, err := netip.ParsePrefix(s)
				if err != nil {
					a, err2 := netip.ParseAddr(s)
					if err2 != nil {
						d.add(v.Line, path, "want an IP address or CIDR prefix, got %s", yamlnode.Kind(v))
						return
					}
					p = netip.PrefixFrom(a, a.BitLen())
				}
				ic.TrustedProxies = append(ic.TrustedProxies, p.Masked())
			})
		},
		"ipv6_prefix":   func(k, v *yaml.Node) { ic.IPv6Prefix = int(d.integer(v, "identity.ipv6_prefix", 0, 128)) },
		"api_keys_file": func(k, v *yaml.Node) { ic.APIKeysFile = rel(d.str(v, "identity.api_keys_file")) },
		"user_header":   func(k, v *yaml.Node) { ic.UserHeader = d.str(v, "identity.user_header") },
		"tier_header":   func(k, v *yaml.Node) { ic.TierHeader = d.str(v, "identity.tier_header") },
		"jwt": func(k, v *yaml.Node) {
			j := &JWTConfig{UserClaim: "sub"}
			d.fields(v, "identity.jwt", map[string]func(k, v *yaml.Node){
				"alg":        func(k, v *yaml.Node) { j.Algorithm = d.str(v, "identity.jwt.alg") },
				"key_file":   func(k, v *yaml.Node) { j.KeyFile = rel(d.str(v, "identity.jwt.key_file")) },
				"user_claim": func(k, v *yaml.Node) { j.UserClaim = d.str(v, "identity.jwt.user_claim") },
				"tier_claim": func(k, v *yaml.Node) { j.TierClaim = d.str(v, "identity.jwt.tier_claim") },
				"issuer":     func(k, v *yaml.Node) { j.Issuer = d.str(v, "identity.jwt.issuer") },
				"audience":   func(k, v *yaml.Node) { j.Audience = d.str(v, "identity.jwt.audience") },
				"leeway":     func(k, v *yaml.Node) { j.Leeway = d.duration(v, "identity.jwt.leeway") },
			})
			switch j.Algorithm {
			case "HS256", "RS256", "ES256":
			default:
				d.add(v.Line, "identity.jwt.alg", "want HS256, RS256 or ES256, got %q", j.Algorithm)
			}
			if j.KeyFile == "" {
				d.add(v.Line, "identity.jwt.key_file", "missing key_file")
			}
			ic.JWT = j
		},
	})
}

var methods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true, http.MethodConnect: true, http.MethodTrace: true,
}

func (d *decoder) route(n *yaml.Node, path string, c *Config) Route {
	var r Route
	seenPath := false
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"path": func(k, v *yaml.Node) {
			seenPath = true
			r.Path = d.str(v, yamlnode.Join(path, "path"))
			if !strings.HasPrefix(r.Path, "/") {
				d.add(v.Line, yamlnode.Join(path, "path"), "want a path prefix starting with /, got %q", r.Path)
			}
		},
		"methods": func(k, v *yaml.Node) {
			d.list(v, yamlnode.Join(path, "methods"), func(_ int, v *yaml.Node, p string) {
				m := strings.ToUpper(d.str(v, p))
				if !methods[m] {
					d.add(v.Line, p, "unknown HTTP method %s", yamlnode.Kind(v))
				}
				r.Methods = append(r.Methods, m)
			})
		},
		"upstream_timeout": func(k, v *yaml.Node) { r.UpstreamTimeout = d.duration(v, yamlnode.Join(path, "upstream_timeout")) },
		"cost":             func(k, v *yaml.Node) { r.Cost = d.integer(v, yamlnode.Join(path, "cost"), 1, 1<<40) },
		"cost_header":      func(k, v *yaml.Node) { r.CostHeader = d.str(v, yamlnode.Join(path, "cost_header")) },
		"rate_limits": func(k, v *yaml.Node) {
			d.list(v, yamlnode.Join(path, "rate_limits"), func(_ int, v *yaml.Node, p string) {
				var desc httplimit.Descriptor
				n := 0
				d.fields(v, p, map[string]func(k, v *yaml.Node){
					"actions": func(k, v *yaml.Node) {
						d.list(v, yamlnode.Join(p, "actions"), func(_ int, v *yaml.Node, p string) {
							n++
							if a := d.action(v, p); a != nil {
								desc.Actions = append(desc.Actions, a)
							}
						})
					},
				})
				if n == 0 {
					d.add(v.Line, yamlnode.Join(p, "actions"), "want at least one action")
				}
				r.Descriptors = append(r.Descriptors, desc)
			})
		},
	})
	if !seenPath {
		d.add(n.Line, yamlnode.Join(path, "path"), "missing path")
	}
	if r.UpstreamTimeout == 0 {
		r.UpstreamTimeout = c.UpstreamTimeout
	}
	return r
}

// action decodes one Envoy rate_limits action: a mapping with exactly one
// of remote_address, request_headers, generic_key, header_value_match, or
// sluice's identity, tier, method and path.
func (d *decoder) action(n *yaml.Node, path string) httplimit.Action {
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		d.add(n.Line, path, "want a mapping with exactly one action (remote_address, request_headers, generic_key, header_value_match, identity, tier, method or path), got %s", yamlnode.Kind(n))
		return nil
	}
	var a httplimit.Action
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"remote_address": func(k, v *yaml.Node) {
			d.fields(v, yamlnode.Join(path, "remote_address"), nil)
			a = httplimit.RemoteAddress{}
		},
		"request_headers": func(k, v *yaml.Node) {
			p := yamlnode.Join(path, "request_headers")
			var x httplimit.RequestHeaders
			d.fields(v, p, map[string]func(k, v *yaml.Node){
				"header_name":    func(k, v *yaml.Node) { x.HeaderName = d.str(v, yamlnode.Join(p, "header_name")) },
				"descriptor_key": func(k, v *yaml.Node) { x.DescriptorKey = d.str(v, yamlnode.Join(p, "descriptor_key")) },
				"skip_if_absent": func(k, v *yaml.Node) { x.SkipIfAbsent = d.boolean(v, yamlnode.Join(p, "skip_if_absent")) },
			})
			if x.HeaderName == "" || x.DescriptorKey == "" {
				d.add(v.Line, p, "header_name and descriptor_key are required")
			}
			a = x
		},
		"generic_key": func(k, v *yaml.Node) {
			p := yamlnode.Join(path, "generic_key")
			var x httplimit.GenericKey
			d.fields(v, p, map[string]func(k, v *yaml.Node){
				"descriptor_value": func(k, v *yaml.Node) { x.DescriptorValue = d.str(v, yamlnode.Join(p, "descriptor_value")) },
				"descriptor_key":   func(k, v *yaml.Node) { x.DescriptorKey = d.str(v, yamlnode.Join(p, "descriptor_key")) },
			})
			if x.DescriptorValue == "" {
				d.add(v.Line, p, "descriptor_value is required")
			}
			a = x
		},
		"header_value_match": func(k, v *yaml.Node) {
			p := yamlnode.Join(path, "header_value_match")
			var x httplimit.HeaderValueMatch
			d.fields(v, p, map[string]func(k, v *yaml.Node){
				"descriptor_value": func(k, v *yaml.Node) { x.DescriptorValue = d.str(v, yamlnode.Join(p, "descriptor_value")) },
				"descriptor_key":   func(k, v *yaml.Node) { x.DescriptorKey = d.str(v, yamlnode.Join(p, "descriptor_key")) },
				"expect_match":     func(k, v *yaml.Node) { x.DontExpectMatch = !d.boolean(v, yamlnode.Join(p, "expect_match")) },
				"headers": func(k, v *yaml.Node) {
					d.list(v, yamlnode.Join(p, "headers"), func(_ int, v *yaml.Node, p string) {
						x.Headers = append(x.Headers, d.headerMatcher(v, p))
					})
				},
			})
			if x.DescriptorValue == "" {
				d.add(v.Line, p, "descriptor_value is required")
			}
			if len(x.Headers) == 0 {
				d.add(v.Line, yamlnode.Join(p, "headers"), "want at least one header matcher")
			}
			a = x
		},
		"identity": func(k, v *yaml.Node) {
			p := yamlnode.Join(path, "identity")
			var x httplimit.IdentityKey
			d.fields(v, p, map[string]func(k, v *yaml.Node){
				"user_key": func(k, v *yaml.Node) { x.UserKey = d.str(v, yamlnode.Join(p, "user_key")) },
				"ip_key":   func(k, v *yaml.Node) { x.IPKey = d.str(v, yamlnode.Join(p, "ip_key")) },
			})
			a = x
		},
		"tier": func(k, v *yaml.Node) {
			p := yamlnode.Join(path, "tier")
			var x httplimit.Tier
			d.fields(v, p, map[string]func(k, v *yaml.Node){
				"descriptor_key": func(k, v *yaml.Node) { x.DescriptorKey = d.str(v, yamlnode.Join(p, "descriptor_key")) },
				"default":        func(k, v *yaml.Node) { x.Default = d.str(v, yamlnode.Join(p, "default")) },
			})
			a = x
		},
		"method": func(k, v *yaml.Node) {
			p := yamlnode.Join(path, "method")
			var x httplimit.Method
			d.fields(v, p, map[string]func(k, v *yaml.Node){
				"descriptor_key": func(k, v *yaml.Node) { x.DescriptorKey = d.str(v, yamlnode.Join(p, "descriptor_key")) },
			})
			a = x
		},
		"path": func(k, v *yaml.Node) {
			p := yamlnode.Join(path, "path")
			var x httplimit.Path
			d.fields(v, p, map[string]func(k, v *yaml.Node){
				"descriptor_key": func(k, v *yaml.Node) { x.DescriptorKey = d.str(v, yamlnode.Join(p, "descriptor_key")) },
			})
			a = x
		},
	})
	return a
}

func (d *decoder) headerMatcher(n *yaml.Node, path string) httplimit.HeaderMatcher {
	var m httplimit.HeaderMatcher
	sm := func(k, v *yaml.Node) {
		p := yamlnode.Join(path, "string_match")
		d.fields(v, p, map[string]func(k, v *yaml.Node){
			"exact":    func(k, v *yaml.Node) { m.Exact = d.str(v, yamlnode.Join(p, "exact")) },
			"prefix":   func(k, v *yaml.Node) { m.Prefix = d.str(v, yamlnode.Join(p, "prefix")) },
			"suffix":   func(k, v *yaml.Node) { m.Suffix = d.str(v, yamlnode.Join(p, "suffix")) },
			"contains": func(k, v *yaml.Node) { m.Contains = d.str(v, yamlnode.Join(p, "contains")) },
		})
	}
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"name":           func(k, v *yaml.Node) { m.Name = d.str(v, yamlnode.Join(path, "name")) },
		"exact_match":    func(k, v *yaml.Node) { m.Exact = d.str(v, yamlnode.Join(path, "exact_match")) },
		"prefix_match":   func(k, v *yaml.Node) { m.Prefix = d.str(v, yamlnode.Join(path, "prefix_match")) },
		"suffix_match":   func(k, v *yaml.Node) { m.Suffix = d.str(v, yamlnode.Join(path, "suffix_match")) },
		"contains_match": func(k, v *yaml.Node) { m.Contains = d.str(v, yamlnode.Join(path, "contains_match")) },
		"present_match":  func(k, v *yaml.Node) { m.Absent = !d.boolean(v, yamlnode.Join(path, "present_match")) },
		"invert_match":   func(k, v *yaml.Node) { m.Invert = d.boolean(v, yamlnode.Join(path, "invert_match")) },
		"string_match":   sm,
	})
	if m.Name == "" {
		d.add(n.Line, yamlnode.Join(path, "name"), "missing header name")
	}
	return m
}
