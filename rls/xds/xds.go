package xds

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/rules"
)

// TypeURL is the resource type the client subscribes to.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// Defaults of Options.
const (
	DefaultNodeID     = "default" // envoyproxy/ratelimit's CONFIG_GRPC_XDS_NODE_ID
	DefaultRetryMin   = time.Second
	DefaultRetryMax   = 60 * time.Second // XDS_CLIENT_BACKOFF_MAX_INTERVAL
	DefaultMaxMsgSize = 4 << 20
)

// Target is what receives the rule sets: *rls.Server.
type Target interface{ SetRules(*rules.Set) }

// Options configures a Client.
type Options struct {
	// Server is the management server's gRPC address (host:port, or any
	// target grpc.NewClient takes).
	Server string
	// NodeID identifies this instance to the server (Envoy Gateway sets
	// its snapshots for one node ID). Default DefaultNodeID.
	NodeID string
	// NodeMetadata is sent as the node's metadata (string values), as
	// envoyproxy/ratelimit sends CONFIG_GRPC_XDS_NODE_METADATA.
	NodeMetadata map[string]string
	// Headers are sent as gRPC metadata when each stream opens, as
	// envoyproxy/ratelimit sends CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS
	// (a token a management server asks for, say). Names are
	// case-insensitive and sent in lower case; New refuses a name gRPC
	// would not send (outside [0-9a-z-_.], or grpc-*), and a value that
	// is not printable ASCII unless the name ends in -bin. Values are
	// never logged.
	Headers map[string]string
	// TLS, when set, connects with TLS (and a client certificate, if it
	// has one); nil connects in cleartext. Its ServerName, when set, is
	// the name the server's certificate must carry instead of the
	// address's host (CONFIG_GRPC_XDS_SERVER_TLS_SAN).
	TLS *tls.Config
	// RetryMin and RetryMax bound the backoff between connection
	// attempts (doubling, with jitter). Defaults DefaultRetryMin and
	// DefaultRetryMax.
	RetryMin, RetryMax time.Duration
	// MaxMsgSize bounds a response from the server. Default 4 MiB, gRPC's
	// default and so envoyproxy/ratelimit's: a response is decoded into
	// rules with a transient cost of about 70 times its size.
	MaxMsgSize int
	// Logger receives connections, accepted and refused configs.
	// Default: none.
	Logger *slog.Logger
}

// Client follows a management server's RateLimitConfigs.
type Client struct {
	o      Options
	target Target
	log    *slog.Logger
	md     metadata.MD // Options.Headers

	mu      sync.Mutex
	version string   // the version last accepted
	names   []string // the resources of the set in use
	lastErr string   // the last refusal

	loaded    atomic.Bool
	connected atomic.Bool
	acks      prometheus.Counter
	nacks     prometheus.Counter
	conns     prometheus.Counter
	up        prometheus.GaugeFunc
	configs   prometheus.GaugeFunc
}

// New returns a client that gives target every accepted set. Run starts
// it.
func New(target Target, o Options) (*Client, error) {
	if o.Server == "" {
		return nil, errors.New("xds: no management server address")
	}
	if o.NodeID == "" {
		o.NodeID = DefaultNodeID
	}
	if o.RetryMin <= 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(DefaultRetryMax, o.RetryMin)
	}
	if o.MaxMsgSize <= 0 {
		o.MaxMsgSize = DefaultMaxMsgSize
	}
	md, err := headers(o.Headers)
	if err != nil {
		return nil, err
	}
	c := &Client{o: o, target: target, log: o.Logger, md: md}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "xds", Name: name, Help: help})
	}
	c.acks = counter("updates_accepted_total", "xDS responses accepted (ACK): their rule set is in use.")
	c.nacks = counter("updates_refused_total", "xDS responses refused (NACK): the previous rule set stays.")
	c.conns = counter("streams_total", "ADS streams opened to the management server.")
	c.up = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "xds", Name: "connected",
		Help: "1 while the ADS stream to the management server is open."}, func() float64 {
		if c.connected.Load() {
			return 1
		}
		return 0
	})
	c.configs = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "xds", Name: "configs",
		Help: "RateLimitConfig resources in the rule set in use."}, func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(len(c.names))
	})
	return c, nil
}

// headers checks Options.Headers and returns them as gRPC metadata; nil
// for none.
func headers(h map[string]string) (metadata.MD, error) {
	if len(h) == 0 {
		return nil, nil
	}
	md := metadata.MD{}
	var errs []error
	for name, v := range h {
		n := strings.ToLower(name)
		switch {
		case n == "" || strings.Trim(n, "0123456789abcdefghijklmnopqrstuvwxyz-_.") != "":
			errs = append(errs, fmt.Errorf("xds: header %q: a gRPC metadata name holds only 0-9, a-z, -, _ and .", name))
		case strings.HasPrefix(n, "grpc-"):
			errs = append(errs, fmt.Errorf("xds: header %q: grpc-* names are gRPC's own", name))
		case md[n] != nil:
			errs = append(errs, fmt.Errorf("xds: header %q: given twice (names are case-insensitive)", name))
		case !strings.HasSuffix(n, "-bin") && strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0:
			errs = append(errs, fmt.Errorf("xds: header %q: the value must be printable ASCII (or the name end in -bin)", name))
		}
		md[n] = []string{v}
	}
	if len(errs) > 0 {
		sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
		return nil, errors.Join(errs...)
	}
	return md, nil
}

// Register adds the client's metrics to reg.
func (c *Client) Register(reg prometheus.Registerer) error {
	for _, col := range []prometheus.Collector{c.acks, c.nacks, c.conns, c.up, c.configs} {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	return nil
}

// Loaded reports whether a set from the server has been accepted.
func (c *Client) Loaded() bool { return c.loaded.Load() }

// Status is what the client has accepted and refused last.
type Status struct {
	Version   string   // the version accepted last ("" none)
	Resources []string // the RateLimitConfig names in use
	LastError string   // why the last refused response was refused
	Connected bool
}

// Status returns the client's state.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Status{Version: c.version, Resources: append([]string(nil), c.names...), LastError: c.lastErr, Connected: c.connected.Load()}
}

// Run connects and follows the server until ctx is done, reconnecting
// after failures; it returns nil then.
func (c *Client) Run(ctx context.Context) error {
	creds := insecure.NewCredentials()
	if c.o.TLS != nil {
		creds = credentials.NewTLS(c.o.TLS)
	}
	conn, err := grpc.NewClient(c.o.Server, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.o.MaxMsgSize)))
	if err != nil {
		return fmt.Errorf("xds: %w", err)
	}
	defer conn.Close()
	ads := discoverypb.NewAggregatedDiscoveryServiceClient(conn)
	names := make([]string, 0, len(c.md))
	for n := range c.md {
		names = append(names, n)
	}
	sort.Strings(names)
	c.log.Info("xds: following the management server", "server", c.o.Server, "node", c.o.NodeID, "type", TypeURL,
		"node_metadata", len(c.o.NodeMetadata), "headers", names, "tls", c.o.TLS != nil, "tls_server_name", c.serverName())
	delay := c.o.RetryMin
	for {
		start := time.Now()
		err := c.stream(ctx, ads)
		c.connected.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		if status.Code(err) == codes.ResourceExhausted {
			// A response past MaxMsgSize cannot be read, so it cannot be
			// NACKed: the stream ends. It is refused all the same, and
			// counted and reported as such; the rules in use stay.
			c.nacks.Inc()
			c.mu.Lock()
			c.lastErr = fmt.Sprintf("a response larger than the client's limit of %d bytes: %v", c.o.MaxMsgSize, status.Convert(err).Message())
			kept := c.version
			c.mu.Unlock()
			c.log.Error("xds: config refused: larger than the message limit; keeping the previous one", "max_bytes", c.o.MaxMsgSize, "kept_version", kept, "error", err)
		}
		if time.Since(start) > c.o.RetryMax {
			delay = c.o.RetryMin // it had been up a while
		}
		wait := delay/2 + rand.N(delay/2+1) // jitter: [delay/2, delay]
		c.log.Warn("xds: stream to the management server ended; retrying", "server", c.o.Server, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		delay = min(2*delay, c.o.RetryMax)
	}
}

// stream runs one ADS stream until it fails or ctx is done.
func (c *Client) stream(ctx context.Context, ads discoverypb.AggregatedDiscoveryServiceClient) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.md != nil {
		sctx = metadata.NewOutgoingContext(sctx, c.md)
	}
	st, err := ads.StreamAggregatedResources(sctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	if err := st.Send(&discoverypb.DiscoveryRequest{Node: c.node(), TypeUrl: TypeURL, VersionInfo: version}); err != nil {
		return err
	}
	c.conns.Inc()
	for {
		resp, err := st.Recv()
		if err != nil {
			return err
		}
		if !c.connected.Swap(true) {
			c.log.Info("xds: connected to the management server", "server", c.o.Server, "node", c.o.NodeID)
		}
		if err := st.Send(c.handle(resp)); err != nil {
			return err
		}
	}
}

// serverName is the name the server's certificate is checked for when
// it is not the address's host ("" then).
func (c *Client) serverName() string {
	if c.o.TLS == nil {
		return ""
	}
	return c.o.TLS.ServerName
}

func (c *Client) node() *corev3.Node {
	n := &corev3.Node{Id: c.o.NodeID, UserAgentName: "sluice"}
	if len(c.o.NodeMetadata) > 0 {
		fields := make(map[string]*structpb.Value, len(c.o.NodeMetadata))
		for k, v := range c.o.NodeMetadata {
			fields[k] = structpb.NewStringValue(v)
		}
		n.Metadata = &structpb.Struct{Fields: fields}
	}
	return n
}

// handle applies resp and returns its ACK, or refuses it and returns its
// NACK (the version accepted before, and why).
func (c *Client) handle(resp *discoverypb.DiscoveryResponse) *discoverypb.DiscoveryRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	req := &discoverypb.DiscoveryRequest{TypeUrl: TypeURL, ResponseNonce: resp.GetNonce(), VersionInfo: c.version}
	var set *rules.Set
	var names []string
	err := fmt.Errorf("response of type %q, want %q", resp.GetTypeUrl(), TypeURL)
	if resp.GetTypeUrl() == TypeURL {
		set, names, err = Build(resp.GetResources())
	}
	if err != nil {
		c.nacks.Inc()
		c.lastErr = err.Error()
		req.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
		c.log.Error("xds: config refused (NACK); keeping the previous one", "version", resp.GetVersionInfo(), "kept_version", c.version, "error", err)
		return req
	}
	c.target.SetRules(set)
	c.version, c.names, c.lastErr = resp.GetVersionInfo(), names, ""
	c.loaded.Store(true)
	c.acks.Inc()
	req.VersionInfo = c.version
	c.log.Info("xds: config loaded", "version", c.version, "resources", names, "domains", set.Domains())
	return req
}

// Build decodes RateLimitConfig resources into one rule set, and returns
// the resources' names, sorted. An error lists every problem found.
func Build(resources []*anypb.Any) (*rules.Set, []string, error) {
	var cfgs []*rules.Config
	var names []string
	var errs []error
	seen := map[string]bool{}
	for i, res := range resources {
		if res.GetTypeUrl() != TypeURL {
			errs = append(errs, fmt.Errorf("resource %d: type %q, want %q", i, res.GetTypeUrl(), TypeURL))
			continue
		}
		var rc rlsconf.RateLimitConfig
		if err := anypb.UnmarshalTo(res, &rc, proto.UnmarshalOptions{}); err != nil {
			errs = append(errs, fmt.Errorf("resource %d: %w", i, err))
			continue
		}
		name := rc.GetName()
		if seen[name] {
			errs = append(errs, fmt.Errorf("resource %q: sent twice", name))
			continue
		}
		seen[name] = true
		cfg, err := Convert(&rc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfgs = append(cfgs, cfg)
		names = append(names, name)
	}
	// Duplicate domains among those that did parse are problems too.
	set, err := rules.NewSet(cfgs...)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	sort.Strings(names)
	return set, names, nil
}

// Convert turns one RateLimitConfig into a rules.Config, through the YAML
// envoyproxy/ratelimit's loader reads from the same proto, so that a rule
// means the same from either source. Problems name the file "xds:NAME" and
// the line in that YAML.
//
// The YAML is written as indented JSON (which is YAML, one field a line):
// encoding/json writes it in a small fraction of the time and memory of a
// YAML emitter, which took 2.5 s and 190 MB for a 0.8 MB response of 7000
// descriptors, and its quoted strings read back exactly, whatever they
// hold ("yes", "#", newlines).
func Convert(rc *rlsconf.RateLimitConfig) (*rules.Config, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	ds, err := descriptors(rc.GetDescriptors(), nil)
	if err != nil {
		return nil, fmt.Errorf("xds:%s: %w", rc.GetName(), err)
	}
	if err := enc.Encode(yamlConfig{Domain: rc.GetDomain(), Descriptors: ds}); err != nil {
		return nil, fmt.Errorf("xds:%s: %w", rc.GetName(), err)
	}
	return rules.Parse("xds:"+rc.GetName(), buf.Bytes())
}

type yamlConfig struct {
	Domain      string           `json:"domain"`
	Descriptors []yamlDescriptor `json:"descriptors,omitempty"`
}

type yamlDescriptor struct {
	Key            string           `json:"key"`
	Value          string           `json:"value,omitempty"`
	RateLimit      *yamlRateLimit   `json:"rate_limit,omitempty"`
	Descriptors    []yamlDescriptor `json:"descriptors,omitempty"`
	ShadowMode     bool             `json:"shadow_mode,omitempty"`
	DetailedMetric bool             `json:"detailed_metric,omitempty"`
	QuotaMode      bool             `json:"quota_mode,omitempty"`
	Metadata       map[string]any   `json:"metadata,omitempty"`
}

type yamlRateLimit struct {
	Unit            string        `json:"unit,omitempty"`
	RequestsPerUnit *uint32       `json:"requests_per_unit,omitempty"`
	Unlimited       bool          `json:"unlimited,omitempty"`
	Name            string        `json:"name,omitempty"`
	Replaces        []yamlReplace `json:"replaces,omitempty"`
}

type yamlReplace struct {
	Name string `json:"name"`
}

// descriptors is the descriptors' YAML; at is the index path of ds's
// parent, to name a descriptor in an error (descriptors[0].descriptors[2]).
func descriptors(ds []*rlsconf.RateLimitDescriptor, at []int) ([]yamlDescriptor, error) {
	out := make([]yamlDescriptor, 0, len(ds))
	if len(ds) == 0 {
		return out, nil
	}
	here := append(at[:len(at):len(at)], 0) // one copy a list, not a descriptor
	for i, d := range ds {
		here[len(at)] = i
		children, err := descriptors(d.GetDescriptors(), here)
		if err != nil {
			return nil, err
		}
		y := yamlDescriptor{Key: d.GetKey(), Value: d.GetValue(), RateLimit: rateLimit(d.GetRateLimit()),
			Descriptors: children, ShadowMode: d.GetShadowMode(), DetailedMetric: d.GetDetailedMetric(), QuotaMode: d.GetQuotaMode()}
		if md := d.GetMetadata(); md != nil {
			if where, n, ok := finite(structpb.NewStructValue(md)); !ok {
				return nil, fmt.Errorf("%s.metadata%s: %v: a metadata number must be finite", descriptorPath(here), where, n)
			}
			y.Metadata = md.AsMap()
		}
		out = append(out, y)
	}
	return out, nil
}

func descriptorPath(at []int) string {
	var b strings.Builder
	for i, n := range at {
		if i > 0 {
			b.WriteByte('.')
		}
		fmt.Fprintf(&b, "descriptors[%d]", n)
	}
	return b.String()
}

// finite reports whether every number in v is finite; if not, where the
// first other is (".a.b[2]") and what it is. The YAML written as JSON
// cannot carry NaN or an infinity (a file can, as .nan or .inf, and Envoy
// gets it back as such). A value without a kind (a Value message sent
// empty) is null, as protojson and AsMap read it.
func finite(v *structpb.Value) (where string, n float64, ok bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NumberValue:
		if math.IsNaN(k.NumberValue) || math.IsInf(k.NumberValue, 0) {
			return "", k.NumberValue, false
		}
	case *structpb.Value_StructValue:
		for name, f := range k.StructValue.GetFields() {
			if where, n, ok := finite(f); !ok {
				return "." + name + where, n, false
			}
		}
	case *structpb.Value_ListValue:
		for i, e := range k.ListValue.GetValues() {
			if where, n, ok := finite(e); !ok {
				return fmt.Sprintf("[%d]%s", i, where), n, false
			}
		}
	}
	return "", 0, true
}

// rateLimit is the policy's YAML: the unit only when known (an unlimited
// policy has none), requests_per_unit unless unlimited without one.
func rateLimit(p *rlsconf.RateLimitPolicy) *yamlRateLimit {
	if p == nil {
		return nil
	}
	y := &yamlRateLimit{Unlimited: p.GetUnlimited(), Name: p.GetName()}
	if p.GetUnit() != rlsconf.RateLimitUnit_UNKNOWN {
		y.Unit = strings.ToLower(p.GetUnit().String())
	} else if !p.GetUnlimited() {
		y.Unit = "unknown" // refused by the parser, as envoyproxy/ratelimit refuses it
	}
	if n := p.GetRequestsPerUnit(); n != 0 || !p.GetUnlimited() {
		y.RequestsPerUnit = &n
	}
	for _, r := range p.GetReplaces() {
		y.Replaces = append(y.Replaces, yamlReplace{Name: r.GetName()})
	}
	return y
}
