package gateway

import (
	"bytes"
	"cmp"
	"embed"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/internal/config/yamlnode"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/rules"
)

// Defaults of the config file.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultAdminListen     = "127.0.0.1:9090"
	DefaultUpstreamTimeout = 30 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
	DefaultSnapshotEvery   = time.Minute

	// Connection limits of the public listener (connections) and of the
	// admin listener (admin_connections); see ConnConfig.
	DefaultMaxConnections      = 10000 // or half the open-file limit, if lower (see DefaultConnections)
	DefaultAdminMaxConnections = 128
	DefaultIdleTimeout         = 75 * time.Second // nginx's keepalive_timeout
	DefaultReadHeaderTimeout   = 10 * time.Second
	DefaultReadTimeout         = 60 * time.Second // nginx's client_body_timeout
	DefaultWriteTimeout        = 30 * time.Second
	DefaultAdminWriteTimeout   = 60 * time.Second // above pprof's 30 s profile
	DefaultMaxHeaderBytes      = 64 << 10

	// Headers in which the gateway tells the upstream who is calling; see
	// IdentityConfig.
	DefaultForwardUserHeader = "X-Sluice-User"
	DefaultForwardTierHeader = "X-Sluice-Tier"
	DefaultForwardKindHeader = "X-Sluice-Identity-Kind"
	// BuiltinEcho is the upstream that answers every request itself with a
	// JSON echo of it: a demo API with nothing else to run.
	BuiltinEcho = "builtin:echo"
)

// DefaultUpstreamIdleConnections is how many idle keep-alive connections
// to the upstream the proxy keeps (upstream_idle_connections).
const DefaultUpstreamIdleConnections = 256

// Config is a parsed gateway config file. Parse fills every default, so
// the zero value of a field below only appears when the file says so.
type Config struct {
	File            string        // the file name given to Parse
	Listen          string        // listen: the public address
	AdminListen     string        // admin_listen: /metrics, /healthz, /readyz
	Upstream        string        // upstream: a URL or builtin:echo; "" when every route names one of Upstreams
	UpstreamTimeout time.Duration // upstream_timeout: per request, unless a route says otherwise
	ShutdownTimeout time.Duration // shutdown_timeout: how long in-flight requests may drain
	Store           string        // store: memory, or a redis://, rediss:// or redis-cluster:// URL
	SnapshotFile    string        // snapshot.file: the memory store's state across restarts ("" none)
	MaxKeys         int           // max_keys: the memory store's bound on keys (memstore.DefaultMaxKeys)
	SnapshotEvery   time.Duration // snapshot.interval
	// Journal (snapshot.journal, default true with snapshot.file) keeps a
	// journal of the quotas' charges beside the snapshot, JournalFile,
	// written every JournalEvery (snapshot.journal_interval).
	Journal       bool
	JournalEvery  time.Duration
	Headers       header.Mode
	OnStoreError  ratelimit.FailurePolicy // on_store_error: allow (default), deny, local or error; fail_closed: true is error
	ResetJitter   float64                 // reset_jitter: spread fixed-window Retry-After over up to this fraction of the window (0: none)
	Shadow        bool                    // shadow: every rule in shadow mode
	Disabled      bool                    // disabled: the kill switch for all limiting
	DisabledRules []string                // disabled_rules: the kill switch per rule (by name)
	Domain        string                  // domain: the rules domain; defaults to the only one
	Pprof         bool                    // pprof: serve net/http/pprof on the admin listener
	// RateLimitEndpoint (rate_limit_endpoint) is the path on the public
	// listener where a caller reads its own limits (GET, GitHub's
	// /rate_limit; see ratelimitendpoint.go); "" turns it off.
	RateLimitEndpoint string
	// AdminTokenFile (admin_token_file) holds the bearer token of the
	// admin API on the admin listener; without it, $SLUICE_ADMIN_TOKEN;
	// without either, the API is refused.
	AdminTokenFile string
	Identity       IdentityConfig
	Routes         []Route
	// InFlight (in_flight) is every route's per-caller in-flight cap, and
	// Shedding (shedding) the load shedders and their priority classes;
	// nil: none. See concurrency.go.
	InFlight *InFlightConfig
	Shedding *SheddingConfig
	// Denial (denial) is every route's answer to a caller over a rate
	// limit or its in-flight cap in place of 429 and problem+json; nil
	// keeps them. A route's own replaces it. See denial.go.
	Denial *httplimit.Denial

	// UpstreamIdleConnections (upstream_idle_connections) is how many idle
	// keep-alive connections to the upstream the proxy keeps for reuse:
	// set it to at least the requests in flight at peak, or the proxy
	// dials the upstream afresh for the rest.
	UpstreamIdleConnections int
	// Upstreams (upstreams) are the services a route may name as its own
	// upstream instead of Upstream, each with its pool and timeout (see
	// upstreams.go).
	Upstreams []UpstreamConfig

	// Warnings are what is legal but probably not meant, each a line
	// "file:line: path: warning: message" (a rate limit action reading a
	// header Go's server never shows a handler). sluice check prints them.
	Warnings []string
	// Connections bounds the public listener's connections
	// (connections:), AdminConnections the admin listener's
	// (admin_connections:). Parse fills every default.
	Connections      ConnConfig
	AdminConnections ConnConfig
	// TLS, when set (tls:), has the public listener terminate TLS.
	TLS *TLSConfig
	// HTTP2 is the public listener's HTTP/2 (http2:).
	HTTP2 HTTP2Config
	// ProxyProtocol, when set (proxy_protocol:), has the public listener
	// read the PROXY protocol header of its trusted peers.
	ProxyProtocol *ProxyProtocolConfig
	// AccessLog, when set (access_log:), logs every decision (accesslog.go).
	AccessLog *AccessLogConfig
	// Tracing, when set (tracing:), makes a span of every routed request
	// (tracing.go).
	Tracing *TracingConfig
	// Decision, when set (decision:), has the public listener answer the
	// proxy in front instead of proxying (decision.go).
	Decision *DecisionConfig
	Rules    *rules.Set

	// readFile reads the files the config names (the embedded files for
	// Default); nil means os.ReadFile.
	readFile func(string) ([]byte, error)
}

// JournalFile is the memory store's journal of quota charges: the
// snapshot file's name with ".journal" added, or "" when there is none
// (no snapshot.file, or snapshot.journal: false).
func (c *Config) JournalFile() string {
	if c.SnapshotFile == "" || !c.Journal {
		return ""
	}
	return c.SnapshotFile + ".journal"
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
//
// The gateway owns the identity headers of what it proxies: from a peer
// that is not a trusted proxy, UserHeader, TierHeader and StripHeaders
// are removed before the request is limited and proxied, and the
// identity the gateway resolved is sent upstream in ForwardUserHeader,
// ForwardTierHeader and ForwardKindHeader, overwriting whatever the
// client sent in those names.
type IdentityConfig struct {
	TrustedProxies []netip.Prefix // trusted_proxies: peers whose X-Forwarded-For/Forwarded is read
	IPv6Prefix     int            // ipv6_prefix: limit IPv6 clients per prefix (e.g. 64); 0 per address
	APIKeysFile    string         // api_keys_file: SHA-256 hashes of keys, user and tier
	UserHeader     string         // user_header: a user ID set by a trusted proxy
	TierHeader     string         // tier_header: the tier, read with user_header
	JWT            *JWTConfig     // jwt

	// StripHeaders (strip_headers) are removed, like UserHeader and
	// TierHeader, from requests whose peer is not a trusted proxy.
	StripHeaders []string
	// ForwardUserHeader (forward_user_header, default X-Sluice-User)
	// carries the user ID of an authenticated caller upstream;
	// ForwardTierHeader (forward_tier_header, default X-Sluice-Tier) its
	// tier when known; ForwardKindHeader (forward_kind_header, default
	// X-Sluice-Identity-Kind) how it was identified: api_key, jwt, header
	// or ip. A client's own values are always removed. "" turns one off.
	ForwardUserHeader string
	ForwardTierHeader string
	ForwardKindHeader string
	// HideCredentials (hide_credentials) removes Authorization and
	// X-API-Key from what is proxied: the upstream gets the identity, not
	// the credential.
	HideCredentials bool
}

// ConnConfig bounds one listener's connections and how long each step of
// a request may take. A zero field means its default (Parse fills them
// all; DefaultConnections and DefaultAdminConnections list them).
type ConnConfig struct {
	// Max (max) is the most connections open at once. At the cap, a new
	// connection closes the connection that has been idle the longest
	// (a keep-alive connection between requests), as nginx does; when
	// none is idle the new connection is accepted and closed at once (a
	// refusal, counted in sluice_gateway_connections_refused_total).
	Max int
	// IdleTimeout (idle_timeout) closes a keep-alive connection that has
	// waited that long for its next request.
	IdleTimeout time.Duration
	// ReadHeaderTimeout (read_header_timeout) bounds reading a request's
	// headers, from the connection's first byte or the end of its
	// previous request.
	ReadHeaderTimeout time.Duration
	// ReadTimeout (read_timeout) bounds reading a request's body, from
	// the end of its headers. It is not http.Server.ReadTimeout (which
	// would also cancel a request whose upstream takes longer).
	ReadTimeout time.Duration
	// WriteTimeout (write_timeout) bounds writing the response: a
	// request's response must be written within its route's
	// upstream_timeout plus WriteTimeout from the end of its headers
	// (within WriteTimeout on the admin listener, and for answers the
	// gateway gives itself).
	WriteTimeout time.Duration
	// MaxHeaderBytes (max_header_bytes) bounds a request's header block;
	// a bigger one is answered 431.
	MaxHeaderBytes int
}

// DefaultConnections returns the public listener's defaults: Max is
// DefaultMaxConnections, or half the process's open-file limit (less 128
// for the upstream, the store and files) when that is lower.
func DefaultConnections() ConnConfig {
	return ConnConfig{
		Max:               min(DefaultMaxConnections, max(fileLimit()-128, 2)/2),
		IdleTimeout:       DefaultIdleTimeout,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
	}
}

// DefaultAdminConnections returns the admin listener's defaults.
func DefaultAdminConnections() ConnConfig {
	c := DefaultConnections()
	c.Max = DefaultAdminMaxConnections
	c.WriteTimeout = DefaultAdminWriteTimeout
	return c
}

// withDefaults fills c's zero fields from def.
func (c ConnConfig) withDefaults(def ConnConfig) ConnConfig {
	positiveOr(&c.Max, def.Max)
	positiveOr(&c.IdleTimeout, def.IdleTimeout)
	positiveOr(&c.ReadHeaderTimeout, def.ReadHeaderTimeout)
	positiveOr(&c.ReadTimeout, def.ReadTimeout)
	positiveOr(&c.WriteTimeout, def.WriteTimeout)
	positiveOr(&c.MaxHeaderBytes, def.MaxHeaderBytes)
	return c
}

// positiveOr sets *v to def unless it is positive.
func positiveOr[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// JWTConfig is the jwt subsection of identity.
type JWTConfig struct {
	Algorithm string // alg: HS256, RS256 or ES256
	KeyFile   string // key_file: the HMAC secret or the PEM public key
	// JWKSURL (jwks_url), instead of KeyFile, is where the keys are
	// fetched (RS256 or ES256): https://, or http:// to a loopback
	// address. JWKSRefresh (jwks_refresh) is how old the keys get before
	// a refresh, JWKSMinInterval (jwks_min_interval) the least time
	// between two fetches (identity.JWKSOptions; 0: its defaults).
	JWKSURL         string
	JWKSRefresh     time.Duration
	JWKSMinInterval time.Duration
	UserClaim       string        // user_claim: default "sub"
	TierClaim       string        // tier_claim: optional
	Issuer          string        // issuer: optional, checked when set
	Audience        string        // audience: optional, checked when set
	Leeway          time.Duration // leeway: clock skew allowed on exp and nbf
}

// Route is one entry of routes: the requests it matches are limited by
// its descriptors and proxied upstream. Routes are registered on an
// http.ServeMux, so they match the cleaned path segment by segment, and
// the most specific pattern wins (see Patterns).
type Route struct {
	// Path (path) is a ServeMux path: "/v1/" is the subtree, and a path
	// that does not end in "/" is both the path itself and its subtree
	// ("/search" is "/search" and "/search/"), so a config written when
	// paths were prefixes limits at least what it limited then (except
	// "/searchx", which "/search" no longer matches).
	Path string
	// Methods (methods) restrict the route to these methods; GET also
	// matches HEAD. Empty: every method.
	Methods []string
	// Host (host) restricts the route to requests for this host (the
	// Host header or absolute request target, port ignored, matched in
	// lower case).
	Host string
	// Pattern (pattern) is an http.ServeMux pattern, used as it is
	// ("[METHOD ][HOST]/PATH": "GET example.com/api/", "/items/{$}"),
	// instead of Path, Methods and Host.
	Pattern string
	// InFlight (in_flight) is the route's own per-caller in-flight cap
	// (max: 0 turns the top level's off), Priority (priority) its
	// shedding class, Adaptive (adaptive) its adaptive concurrency limit.
	// See concurrency.go.
	// Denial (denial) is the route's answer over its rate limits and
	// in-flight cap; nil takes the top level's. See denial.go.
	Denial       *httplimit.Denial
	InFlight     *InFlightConfig
	Priority     string
	Adaptive     *AdaptiveConfig
	priorityLine int

	// Upstream (upstream) names the route's upstream in Config.Upstreams;
	// "" is the top-level upstream. UpstreamTimeout (upstream_timeout) is
	// the route's own, else its upstream's timeout, else the top level's.
	Upstream        string
	UpstreamTimeout time.Duration
	Cost            int64
	CostHeader      string
	Descriptors     []action.Descriptor
	// RefundOn (refund_on) lists the upstream's response statuses on
	// which what a request was charged is given back (refund.go); empty:
	// never. RefundOnGateway holds the gateway's own failures refund_on
	// names (upstream_timeout, upstream_unreachable): a 502 or 504 in
	// RefundOn is the upstream's own answer, not the gateway's.
	RefundOn        StatusSet
	RefundOnGateway GatewayFailures
	// RefundBudget (refund_budget) bounds the refunds per rule, caller and
	// window (httplimit.Middleware.RefundBudget); 0 is its default.
	RefundBudget float64
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

// prefixes reads a list of IP addresses and CIDR prefixes (an address
// is its own /32 or /128).
func (d *decoder) prefixes(n *yaml.Node, path string) []netip.Prefix {
	var ps []netip.Prefix
	d.list(n, path, func(_ int, v *yaml.Node, path string) {
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
		ps = append(ps, p.Masked())
	})
	return ps
}

func (d *decoder) identity(n *yaml.Node, ic *IdentityConfig, rel func(string) string) {
	d.fields(n, "identity", map[string]func(k, v *yaml.Node){
		"trusted_proxies": func(k, v *yaml.Node) {
			ic.TrustedProxies = d.prefixes(v, "identity.trusted_proxies")
		},
		"ipv6_prefix":   func(k, v *yaml.Node) { ic.IPv6Prefix = int(d.integer(v, "identity.ipv6_prefix", 0, 128)) },
		"api_keys_file": func(k, v *yaml.Node) { ic.APIKeysFile = rel(d.str(v, "identity.api_keys_file")) },
		"user_header":   func(k, v *yaml.Node) { ic.UserHeader = d.header(v, "identity.user_header") },
		"tier_header":   func(k, v *yaml.Node) { ic.TierHeader = d.header(v, "identity.tier_header") },
		"strip_headers": func(k, v *yaml.Node) {
			d.list(v, "identity.strip_headers", func(_ int, v *yaml.Node, path string) {
				if h := d.header(v, path); h != "" {
					ic.StripHeaders = append(ic.StripHeaders, h)
				}
			})
		},
		"forward_user_header": func(k, v *yaml.Node) { ic.ForwardUserHeader = d.header(v, "identity.forward_user_header") },
		"forward_tier_header": func(k, v *yaml.Node) { ic.ForwardTierHeader = d.header(v, "identity.forward_tier_header") },
		"forward_kind_header": func(k, v *yaml.Node) { ic.ForwardKindHeader = d.header(v, "identity.forward_kind_header") },
		"hide_credentials":    func(k, v *yaml.Node) { ic.HideCredentials = d.boolean(v, "identity.hide_credentials") },
		"jwt":                 func(k, v *yaml.Node) { ic.JWT = d.jwt(v, rel) },
	})
}

var methods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true, http.MethodConnect: true, http.MethodTrace: true,
}

func (d *decoder) route(n *yaml.Node, path string, c *Config) Route {
	var r Route
	var pathLine, patternLine, upstreamLine int
	refundOn, refundBudget, refundsDone := d.refunds(&r, path, c)
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"path": func(k, v *yaml.Node) {
			pathLine = v.Line
			r.Path = d.str(v, yamlnode.Join(path, "path"))
			if !strings.HasPrefix(r.Path, "/") {
				d.add(v.Line, yamlnode.Join(path, "path"), "want a path starting with /, got %q", r.Path)
			}
		},
		"pattern": func(k, v *yaml.Node) {
			patternLine = v.Line
			r.Pattern = d.str(v, yamlnode.Join(path, "pattern"))
			if err := validPattern(r.Pattern); err != nil {
				d.add(v.Line, yamlnode.Join(path, "pattern"), "%v", err)
			}
		},
		"host": func(k, v *yaml.Node) {
			r.Host = d.str(v, yamlnode.Join(path, "host"))
			if err := validHost(r.Host); err != nil {
				d.add(v.Line, yamlnode.Join(path, "host"), "%v", err)
			}
		},
		"methods":          func(k, v *yaml.Node) { r.Methods = d.methods(v, yamlnode.Join(path, "methods")) },
		"upstream_timeout": func(k, v *yaml.Node) { r.UpstreamTimeout = d.duration(v, yamlnode.Join(path, "upstream_timeout")) },
		"upstream": func(k, v *yaml.Node) {
			r.Upstream, upstreamLine = d.str(v, yamlnode.Join(path, "upstream")), v.Line
		},
		"refund_on":     refundOn,
		"refund_budget": refundBudget,
		"cost":          func(k, v *yaml.Node) { r.Cost = d.integer(v, yamlnode.Join(path, "cost"), 1, 1<<40) },
		"cost_header": func(k, v *yaml.Node) {
			p := yamlnode.Join(path, "cost_header")
			r.CostHeader = d.str(v, p)
			if _, err := action.CheckHeader(r.CostHeader); err != nil {
				d.add(v.Line, p, "%v", err)
			} else if strings.HasPrefix(r.CostHeader, ":") || strings.EqualFold(r.CostHeader, "Host") {
				d.add(v.Line, p, "%s cannot carry a cost: name a request header a trusted proxy sets", r.CostHeader)
			}
		},
		"in_flight": func(k, v *yaml.Node) {
			r.InFlight = d.inFlight(v, yamlnode.Join(path, "in_flight"), true)
		},
		"priority": func(k, v *yaml.Node) {
			r.Priority, r.priorityLine = d.str(v, yamlnode.Join(path, "priority")), v.Line
		},
		"adaptive": func(k, v *yaml.Node) {
			r.Adaptive = d.adaptive(v, yamlnode.Join(path, "adaptive"))
		},
		"rate_limits": func(k, v *yaml.Node) { r.Descriptors = d.rateLimits(v, yamlnode.Join(path, "rate_limits"), c) },
		"denial":      func(k, v *yaml.Node) { r.Denial = d.denial(v, yamlnode.Join(path, "denial")) },
	})
	switch {
	case r.Pattern != "" && (pathLine != 0 || r.Host != "" || len(r.Methods) > 0):
		d.add(patternLine, yamlnode.Join(path, "pattern"), "pattern says method, host and path itself: drop path, host and methods")
	case r.Pattern == "" && pathLine == 0 && patternLine == 0:
		d.add(n.Line, yamlnode.Join(path, "path"), "missing path (or pattern)")
	}
	d.routeUpstream(&r, cmp.Or(upstreamLine, n.Line), path, c) // upstreams.go
	if r.Denial == nil {
		r.Denial = c.Denial
	}
	refundsDone()
	return r
}

// methods decodes a route's methods.
func (d *decoder) methods(n *yaml.Node, path string) []string {
	var ms []string
	d.list(n, path, func(_ int, v *yaml.Node, p string) {
		m := strings.ToUpper(d.str(v, p))
		switch {
		case m == http.MethodConnect:
			d.add(v.Line, p, "CONNECT is not proxied (the gateway answers it 405)")
		case !methods[m]:
			d.add(v.Line, p, "unknown HTTP method %s", yamlnode.Kind(v))
		}
		ms = append(ms, m)
	})
	return ms
}

// rateLimits decodes a route's rate_limits: Envoy's list of descriptors,
// each a list of actions.
func (d *decoder) rateLimits(n *yaml.Node, path string, c *Config) []action.Descriptor {
	var descs []action.Descriptor
	d.list(n, path, func(_ int, v *yaml.Node, p string) {
		var desc action.Descriptor
		n := 0
		d.fields(v, p, map[string]func(k, v *yaml.Node){
			"actions": func(k, v *yaml.Node) {
				d.list(v, yamlnode.Join(p, "actions"), func(_ int, v *yaml.Node, p string) {
					n++
					if a := d.action(v, p); a != nil {
						d.checkAction(c, a, v, p)
						desc.Actions = append(desc.Actions, a)
					}
				})
			},
		})
		if n == 0 {
			d.add(v.Line, yamlnode.Join(p, "actions"), "want at least one action")
		}
		descs = append(descs, desc)
	})
	return descs
}

// checkAction checks the header names that a reads (action.Check,
// which sluice check used to run on its own): an unknown pseudo-header or
// an invalid name is a problem, a header Go's server never shows a
// handler a warning in c.Warnings.
func (d *decoder) checkAction(c *Config, a action.Action, n *yaml.Node, path string) {
	ws, ps := action.Check(a)
	for _, p := range ps {
		d.add(lineIn(n, p.Path), yamlnode.Join(path, p.Path), "%s", p.Msg)
	}
	for _, w := range ws {
		c.Warnings = append(c.Warnings, rules.Problem{File: d.file, Line: lineIn(n, w.Path), Path: yamlnode.Join(path, w.Path), Msg: "warning: " + w.Msg}.Error())
	}
}

// lineIn returns the line of the node at path ("a.b[2].c") below n, or
// n's line when there is none.
func lineIn(n *yaml.Node, path string) int {
	line := n.Line
	for _, seg := range strings.Split(path, ".") {
		key, rest, _ := strings.Cut(seg, "[")
		if n = mappingValue(n, key); n == nil {
			return line
		}
		line = n.Line
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			if !ok || err != nil || n.Kind != yaml.SequenceNode || i < 0 || i >= len(n.Content) {
				return line
			}
			n, line = n.Content[i], n.Content[i].Line
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return line
}

// mappingValue is the value of key in mapping n (aliases followed), or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// noClusterNames refuses Envoy's destination_cluster and source_cluster:
// their entries carry the name of the route's target cluster and of the
// local service's cluster, and the gateway has no such names (upstreams
// that are not clusters, routes without names, no service cluster of its
// own), so any value put there would be made up. A constant per route says the
// same thing.
func (d *decoder) noClusterNames(v *yaml.Node, path, what string) {
	name := path[strings.LastIndexByte(path, '.')+1:]
	if what == "route" {
		d.add(v.Line, path, "the gateway has no Envoy clusters (its routes have no names), so there is no cluster name for %s's entry: on each route, use generic_key: {descriptor_key: %s, descriptor_value: <a name for the route>}", name, name)
		return
	}
	d.add(v.Line, path, "the gateway has no service cluster of its own, so there is no name for %s's entry: use generic_key: {descriptor_key: %s, descriptor_value: <this gateway's name>}", name, name)
}

// queryMatcher decodes one of query_parameter_value_match's
// query_parameters: Envoy's QueryParameterMatcher, a name and either a
// string_match (exact, prefix, suffix, contains or safe_regex, with
// ignore_case) or a present_match.
func (d *decoder) queryMatcher(n *yaml.Node, path string) action.QueryParameterMatcher {
	var m action.QueryParameterMatcher
	specs := 0
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"name": func(k, v *yaml.Node) { m.Name = d.str(v, yamlnode.Join(path, "name")) },
		"present_match": func(k, v *yaml.Node) {
			specs++
			b := d.boolean(v, yamlnode.Join(path, "present_match"))
			m.Present = &b
		},
		"string_match": func(k, v *yaml.Node) {
			specs++
			p := yamlnode.Join(path, "string_match")
			conds := 0
			set := func(dst *string, f string) func(k, v *yaml.Node) {
				return func(k, v *yaml.Node) {
					conds++
					fp := yamlnode.Join(p, f)
					if *dst = d.str(v, fp); *dst == "" && v.Kind == yaml.ScalarNode {
						if f != "exact" {
							d.add(v.Line, fp, "want a non-empty %s (Envoy refuses an empty one)", f)
							return
						}
						// Envoy's exact: "" matches an empty value only, which
						// Exact "" (no condition) would not say.
						m.SafeRegex, _ = action.CompileSafeRegex("")
					}
				}
			}
			d.fields(v, p, map[string]func(k, v *yaml.Node){
				"exact":       set(&m.Exact, "exact"),
				"prefix":      set(&m.Prefix, "prefix"),
				"suffix":      set(&m.Suffix, "suffix"),
				"contains":    set(&m.Contains, "contains"),
				"ignore_case": func(k, v *yaml.Node) { m.IgnoreCase = d.boolean(v, yamlnode.Join(p, "ignore_case")) },
				"safe_regex": func(k, v *yaml.Node) {
					conds++
					rp := yamlnode.Join(p, "safe_regex")
					var expr string
					d.fields(v, rp, map[string]func(k, v *yaml.Node){
						"regex":      func(k, v *yaml.Node) { expr = d.str(v, yamlnode.Join(rp, "regex")) },
						"google_re2": func(k, v *yaml.Node) {}, // deprecated in Envoy; Go's regexp is RE2
					})
					re, err := action.CompileSafeRegex(expr)
					switch {
					case expr == "":
						d.add(v.Line, yamlnode.Join(rp, "regex"), "missing regex")
					case err != nil:
						d.add(lineIn(v, "regex"), yamlnode.Join(rp, "regex"), "%v", err)
					default:
						m.SafeRegex = re
					}
				},
			})
			if conds != 1 {
				d.add(v.Line, p, "want exactly one of exact, prefix, suffix, contains and safe_regex")
			}
		},
	})
	if m.Name == "" {
		d.add(n.Line, yamlnode.Join(path, "name"), "missing query parameter name")
	}
	if specs > 1 {
		d.add(n.Line, path, "want string_match or present_match, not both")
	}
	return m
}

func (d *decoder) headerMatcher(n *yaml.Node, path string) action.HeaderMatcher {
	var m action.HeaderMatcher
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

func (d *decoder) connections(n *yaml.Node, path string, cc *ConnConfig) {
	p := func(f string) string { return yamlnode.Join(path, f) }
	d.fields(n, path, map[string]func(k, v *yaml.Node){
		"max":                 func(k, v *yaml.Node) { cc.Max = int(d.integer(v, p("max"), 1, 1<<24)) },
		"idle_timeout":        func(k, v *yaml.Node) { cc.IdleTimeout = d.duration(v, p("idle_timeout")) },
		"read_header_timeout": func(k, v *yaml.Node) { cc.ReadHeaderTimeout = d.duration(v, p("read_header_timeout")) },
		"read_timeout":        func(k, v *yaml.Node) { cc.ReadTimeout = d.duration(v, p("read_timeout")) },
		"write_timeout":       func(k, v *yaml.Node) { cc.WriteTimeout = d.duration(v, p("write_timeout")) },
		"max_header_bytes": func(k, v *yaml.Node) {
			cc.MaxHeaderBytes = int(d.integer(v, p("max_header_bytes"), 1024, 64<<20))
		},
	})
}

// header reads a header name, in canonical form ("" stays "").
func (d *decoder) header(n *yaml.Node, path string) string {
	h := d.str(n, path)
	if h == "" {
		return ""
	}
	if !httpguts.ValidHeaderFieldName(h) {
		d.add(n.Line, path, "want a header name, got %s", yamlnode.Kind(n))
		return ""
	}
	return http.CanonicalHeaderKey(h)
}
