package twodoors

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/rules"
)

// keys are the descriptor keys of the random files; each is read from the
// request header X-<key> by the gateway.
var keys = []string{"k0", "k1", "k2", "k3"}

// shapes are the descriptors a request may carry: one entry each, and two
// nested ones.
var shapes = [][]string{{"k0"}, {"k1"}, {"k2"}, {"k3"}, {"k0", "k1"}, {"k2", "k3"}}

// randomRules writes a random rule file over keys: top-level descriptors
// with or without a value, some with a nested descriptor, each with a
// random limit of a random algorithm, unlimited, shadow, quota or
// replaces.
func randomRules(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	n := 0
	var names []string
	var replaces []*strings.Builder
	limit := func(indent string) {
		n++
		name := fmt.Sprintf("r%d", n)
		switch rng.IntN(10) {
		case 0:
			fmt.Fprintf(&b, "%squota: {period: %s, limit: %d}\n", indent, []string{"day", "month"}[rng.IntN(2)], 1+rng.IntN(4))
			return
		case 1:
			fmt.Fprintf(&b, "%srate_limit: {unlimited: true", indent)
		default:
			unit := []string{"second", "minute"}[rng.IntN(2)]
			fmt.Fprintf(&b, "%srate_limit: {name: %s, unit: %s, requests_per_unit: %d", indent, name, unit, 1+rng.IntN(4))
			names = append(names, name)
			switch rng.IntN(5) {
			case 1:
				b.WriteString(", algorithm: gcra")
			case 2:
				fmt.Fprintf(&b, ", algorithm: token_bucket, burst: %d", 1+rng.IntN(3))
			case 3:
				b.WriteString(", algorithm: sliding_window_counter")
			case 4:
				b.WriteString(", algorithm: sliding_window_log")
			}
		}
		// A placeholder for replaces, filled once every name is known.
		r := &strings.Builder{}
		replaces = append(replaces, r)
		b.WriteString("\x00}\n")
	}
	for _, k := range keys {
		for _, v := range []string{"", "v0"} {
			if rng.IntN(3) == 0 {
				continue
			}
			fmt.Fprintf(&b, "  - key: %s\n", k)
			if v != "" {
				fmt.Fprintf(&b, "    value: %s\n", v)
			}
			if rng.IntN(6) == 0 {
				b.WriteString("    shadow_mode: true\n")
			}
			if rng.IntN(4) != 0 {
				limit("    ")
			}
			if i := indexOf(k); i%2 == 0 && rng.IntN(2) == 0 {
				fmt.Fprintf(&b, "    descriptors:\n      - key: %s\n", keys[i+1])
				limit("        ")
			}
		}
	}
	for _, r := range replaces {
		if len(names) > 0 && rng.IntN(4) == 0 {
			fmt.Fprintf(r, ", replaces: [{name: %s}]", names[rng.IntN(len(names))])
		}
	}
	out := b.String()
	for _, r := range replaces {
		out = strings.Replace(out, "\x00", r.String(), 1)
	}
	return out
}

func indexOf(k string) int {
	for i, x := range keys {
		if x == k {
			return i
		}
	}
	return -1
}

// request is one request: for each shape carried, the values of its keys.
type request struct {
	shapes []int
	values map[string]string
}

func randomRequest(rng *rand.Rand) request {
	r := request{values: map[string]string{}}
	for i := range shapes {
		if rng.IntN(3) == 0 {
			r.shapes = append(r.shapes, i)
		}
	}
	if len(r.shapes) == 0 {
		r.shapes = []int{rng.IntN(len(shapes))}
	}
	for _, k := range keys {
		r.values[k] = []string{"v0", "v1", "v0"}[rng.IntN(3)]
	}
	return r
}

type outcome struct {
	allowed bool
	headers map[string]string // the rate limit headers sent
	// per descriptor index: remaining and reset (seconds) of each limited
	// check the gateway observed
	remaining map[string]int64
	reset     map[string]int64
}

func TestDoorsAgree(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TWODOORS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (TWODOORS_SEED=%[1]d repeats it)", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	compared, files := 0, 0
	for files < 400 {
		text := randomRules(rng)
		cfg, err := rules.Parse("random.yaml", []byte(text))
		if err != nil {
			continue // a random replaces that names itself, say
		}
		files++
		set, err := rules.NewSet(cfg)
		if err != nil {
			t.Fatal(err)
		}
		compared += runSequence(t, rng, set, text)
		if t.Failed() {
			return
		}
	}
	if compared < 5000 {
		t.Errorf("only %d requests compared", compared)
	}
	t.Logf("%d rule files, %d requests compared, %d with headers", files, compared, withHeaders)
	if withHeaders < compared/4 {
		t.Errorf("only %d of %d requests compared had rate limit headers", withHeaders, compared)
	}
}

// TestDoorsUnlimitedReplaces is the case the doors once disagreed on: a
// limited rule and an unlimited rule that replaces it.
func TestDoorsUnlimitedReplaces(t *testing.T) {
	text := `
domain: d
descriptors:
  - key: k0
    rate_limit: {name: limited, unit: minute, requests_per_unit: 1}
  - key: k1
    rate_limit: {unlimited: true, replaces: [{name: limited}]}
`
	cfg, err := rules.Parse("f.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := rules.NewSet(cfg)
	d := newDoors(t, set, header.IETF)
	req := request{shapes: []int{0, 1}, values: map[string]string{"k0": "a", "k1": "b"}}
	for i := range 3 {
		g, r := d.gateway(t, req), d.rls(t, req)
		if !g.allowed || !r.allowed {
			t.Fatalf("request %d: gateway allowed %v, rls allowed %v; want both (the unlimited rule replaces the limit)", i, g.allowed, r.allowed)
		}
	}
}

type doors struct {
	mode  header.Mode
	clock *ratelimittest.Clock
	gw    http.Handler
	srv   *rls.Server
	obs   *outcome
}

func newDoors(t *testing.T, set *rules.Set, mode header.Mode) *doors {
	clock := ratelimittest.NewClock(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	gs := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	rs := memstore.New(memstore.Options{Now: clock.Now, SweepInterval: -1})
	t.Cleanup(func() { gs.Close(); rs.Close() })
	d := &doors{clock: clock, mode: mode}
	var descs []action.Descriptor
	for i, sh := range shapes {
		var as []action.Action
		as = append(as, action.RequestHeaders{HeaderName: fmt.Sprintf("X-Shape-%d", i), DescriptorKey: ""})
		for _, k := range sh {
			as = append(as, action.RequestHeaders{HeaderName: "X-" + k, DescriptorKey: k})
		}
		descs = append(descs, action.Descriptor{Actions: as})
	}
	mw := &httplimit.Middleware{Store: gs, Rules: set, Domain: "d", Descriptors: descs, Now: clock.Now, Headers: mode,
		Observe: func(e httplimit.Event) {
			if e.Outcome == httplimit.StoreError {
				t.Errorf("gateway store error: %v", e.Err)
				return
			}
			d.obs.remaining[e.Key] = e.Decision.Remaining
			d.obs.reset[e.Key] = ratelimit.DurationCeil(e.Decision.ResetAfter)
		}}
	d.gw = mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv, err := rls.New(rs, set, rls.Options{Now: clock.Now, Headers: mode})
	if err != nil {
		t.Fatal(err)
	}
	d.srv = srv
	return d
}

func (d *doors) gateway(t *testing.T, req request) outcome {
	d.obs = &outcome{remaining: map[string]int64{}, reset: map[string]int64{}}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.1:1"
	for _, i := range req.shapes {
		r.Header.Set(fmt.Sprintf("X-Shape-%d", i), "1")
	}
	for k, v := range req.values {
		r.Header.Set("X-"+k, v)
	}
	w := httptest.NewRecorder()
	d.gw.ServeHTTP(w, r)
	if w.Code != 200 && w.Code != 429 {
		t.Fatalf("gateway answered %d: %s", w.Code, w.Body)
	}
	o := *d.obs
	o.allowed = w.Code == 200
	o.headers = map[string]string{}
	for _, k := range []string{"RateLimit-Policy", "RateLimit", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if v := w.Header().Get(k); v != "" {
			o.headers[k] = v
		}
	}
	return o
}

func (d *doors) rls(t *testing.T, req request) outcome {
	var in []*commonpb.RateLimitDescriptor
	for _, i := range req.shapes {
		desc := &commonpb.RateLimitDescriptor{}
		for _, k := range shapes[i] {
			desc.Entries = append(desc.Entries, &commonpb.RateLimitDescriptor_Entry{Key: k, Value: req.values[k]})
		}
		in = append(in, desc)
	}
	resp, err := d.srv.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "d", Descriptors: in})
	if err != nil {
		t.Fatal(err)
	}
	o := outcome{allowed: resp.OverallCode == pb.RateLimitResponse_OK, remaining: map[string]int64{}, reset: map[string]int64{}, headers: map[string]string{}}
	for _, h := range resp.ResponseHeadersToAdd {
		o.headers[h.Key] = h.Value
	}
	set := d.srv.Rules()
	descs := make([]rules.Descriptor, len(in))
	for i, desc := range in {
		for _, e := range desc.Entries {
			descs[i].Entries = append(descs[i].Entries, rules.Entry{Key: e.Key, Value: e.Value})
		}
		descs[i].Hits = 1
	}
	checks, err := set.Resolve(nil, rules.Input{Domain: "d", Descriptors: descs, Now: d.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range resp.Statuses {
		if checks[i].Kind != rules.Limited {
			continue
		}
		o.remaining[checks[i].Request.Key] = int64(st.LimitRemaining)
		o.reset[checks[i].Request.Key] = st.DurationUntilReset.GetSeconds()
	}
	return o
}

// withHeaders counts the requests compared with rate limit headers.
var withHeaders int

// runSequence sends up to 60 random requests through both doors and
// returns how many it compared.
func runSequence(t *testing.T, rng *rand.Rand, set *rules.Set, text string) int {
	mode := []header.Mode{header.IETF, header.Legacy}[rng.IntN(2)]
	d := newDoors(t, set, mode)
	for n := range 60 {
		req := randomRequest(rng)
		g, r := d.gateway(t, req), d.rls(t, req)
		if g.allowed != r.allowed {
			t.Errorf("request %d %v: gateway allowed %v, rls allowed %v\nrules:\n%s", n, req, g.allowed, r.allowed, text)
			return n
		}
		for k, rem := range g.remaining {
			if rr, ok := r.remaining[k]; !ok || rr != rem || r.reset[k] != g.reset[k] {
				t.Errorf("request %d %v, %s: gateway remaining %d reset %ds, rls remaining %d reset %ds (reported %v)\nrules:\n%s",
					n, req, k, rem, g.reset[k], rr, r.reset[k], ok, text)
				return n
			}
		}
		if len(g.headers) > 0 {
			withHeaders++
		}
		if (g.allowed || len(r.remaining) == 1) && !maps.Equal(g.headers, r.headers) {
			t.Errorf("request %d %v, %v headers: gateway %v, rls %v\nrules:\n%s", n, req, mode, g.headers, r.headers, text)
			return n
		}
		if !g.allowed && len(r.remaining) > 1 {
			// The doors charge a request denied by one of several limits
			// differently, by design: start a new sequence.
			return n + 1
		}
		d.clock.Set(d.clock.Now().Add(time.Duration(rng.IntN(1500)) * time.Millisecond))
	}
	return 60
}
