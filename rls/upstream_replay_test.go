package rls_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/header"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/rls"
)

// The replay of envoyproxy/ratelimit's own tests: the scenarios of its
// test/integration/integration_test.go and test/service/ratelimit_test.go
// (requests, configurations, settings, and the answers and stats they
// expect), transcribed as data in testdata/upstream/*.yaml, run against a
// real gRPC server on 127.0.0.1 (an rls.Server on grpc-go, with a grpc-go
// client) on the memory store and on a real redis-server. A scenario's
// variants are upstream's settings (LOCAL_CACHE_SIZE_IN_BYTES,
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, CACHE_KEY_PREFIX, SHADOW_MODE,
// QUOTA_MODE, LIMIT_*_HEADER, EXTRA_TAGS); the stats are read as statsd
// lines, with upstream's names. The clock is fixed (a minute's start) and
// moved only by the scenarios, so windows never roll over mid-scenario and
// every duration_until_reset is exact where upstream could only compare.
// Scenarios that cannot apply to sluice say why (not_applicable) and are
// counted, not run.

type replayFile struct {
	Scenarios []replayScenario `yaml:"scenarios"`
}

type replayScenario struct {
	Name          string          `yaml:"name"`
	Source        string          `yaml:"source"`
	Config        []string        `yaml:"config"`
	Store         string          `yaml:"store"` // "": memory and redis; "down": a Redis that is not there
	NotApplicable string          `yaml:"not_applicable"`
	Variants      []replayVariant `yaml:"variants"`
	Steps         []replayStep    `yaml:"steps"`
}

type replayVariant struct {
	Name          string            `yaml:"name"`
	LocalCache    int               `yaml:"local_cache"`
	StopIncrement bool              `yaml:"stop_increment"`
	KeyPrefix     string            `yaml:"key_prefix"`
	ShadowMode    bool              `yaml:"shadow_mode"`
	QuotaMode     bool              `yaml:"quota_mode"`
	Headers       string            `yaml:"headers"`      // envoy
	HeaderNames   []string          `yaml:"header_names"` // LIMIT,REMAINING,RESET
	StatsdTags    map[string]string `yaml:"statsd_tags"`
}

type replayStep struct {
	Note    string            `yaml:"note"`
	Only    []string          `yaml:"only"` // variant names; empty: all
	Domain  string            `yaml:"domain"`
	Send    [][][2]string     `yaml:"send"` // descriptors of entries, as upstream's NewRateLimitRequest; "{i}" is the repetition
	Hits    *uint32           `yaml:"hits"` // the request's hits_addend; default 1
	Times   int               `yaml:"times"`
	Advance string            `yaml:"advance"` // move the clock first
	Write   string            `yaml:"write_config"`
	Remove  string            `yaml:"remove_config"`
	Load    *bool             `yaml:"load"` // reload the directory; true: must load, false: must be refused
	Expect  *replayExpect     `yaml:"expect"`
	Stats   map[string]uint64 `yaml:"stats"` // after the step: counters summed since the start, gauges' last value
}

type replayExpect struct {
	Overall  string         `yaml:"overall"`
	Statuses []replayStatus `yaml:"statuses"`
	Headers  [][2]string    `yaml:"headers"`
	Error    string         `yaml:"error"` // a gRPC code name, e.g. InvalidArgument
	Message  string         `yaml:"message"`
}

type replayStatus struct {
	Code          string `yaml:"code"`
	Limit         string `yaml:"limit"` // "20/MINUTE"; empty: none
	Name          string `yaml:"name"`
	Remaining     int64  `yaml:"remaining"`
	RemainingStep int64  `yaml:"remaining_step"` // added per repetition
	Reset         *int64 `yaml:"reset"`          // seconds
}

// replayStart is where every scenario's clock starts: 2026-03-02 10:00:00
// UTC, the start of a minute and of an hour.
var replayStart = time.Unix(1772445600, 0)

func loadReplay(t *testing.T) map[string][]replayScenario {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "upstream", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	out := map[string][]replayScenario{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rf replayFile
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&rf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = rf.Scenarios
	}
	return out
}

// TestUpstreamReplay runs every scenario, in every variant, on every store,
// and logs the count: scenarios, runs passed, scenarios not applicable.
func TestUpstreamReplay(t *testing.T) {
	files := loadReplay(t)
	var names []string
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	total, na, runs := 0, 0, 0
	var failed []string
	for _, f := range names {
		for _, sc := range files[f] {
			total++
			if sc.NotApplicable != "" {
				na++
				continue
			}
			stores := []string{"memory", "redis"}
			if sc.Store == "down" {
				stores = []string{"redis-down"}
			}
			variants := sc.Variants
			if len(variants) == 0 {
				variants = []replayVariant{{Name: "default"}}
			}
			for _, store := range stores {
				for _, v := range variants {
					name := sc.Name + "/" + store + "/" + v.Name
					runs++
					if !t.Run(name, func(t *testing.T) { runReplay(t, sc, v, store) }) {
						failed = append(failed, name)
					}
				}
			}
		}
	}
	t.Logf("upstream replay: %d scenarios (%d not applicable), %d runs (scenario × variant × store), %d failed %v",
		total, na, runs, len(failed), failed)
}

func runReplay(t *testing.T, sc replayScenario, v replayVariant, storeKind string) {
	now := replayStart
	clock := func() time.Time { return now }
	var store ratelimit.Store
	switch storeKind {
	case "memory":
		m := memstore.New(memstore.Options{Now: clock})
		t.Cleanup(func() { m.Close() })
		store = m
	case "redis", "redis-down":
		if testing.Short() {
			t.Skip("-short: no Redis")
		}
		url := "redis://127.0.0.1:1" // nothing listens on port 1
		if storeKind == "redis" {
			redistest.Require(t)
			url = redistest.Shared(t).URL()
		}
		prefix := redistest.Prefix(t) + v.KeyPrefix
		r, err := redisstore.Open(context.Background(), url, redisstore.Options{Now: clock, Prefix: prefix,
			Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		store = r
	}
	dir := t.TempDir()
	for _, c := range sc.Config {
		copyFile(t, filepath.Join("testdata", "upstream", "config", c), filepath.Join(dir, c))
	}
	l := listenStatsd(t)
	sd, err := rls.DialStatsd(l.addr(), rls.StatsdOptions{FlushInterval: time.Hour, Tags: v.StatsdTags})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sd.Close() })
	opts := rls.Options{Statsd: sd, Now: clock, LocalCacheSize: v.LocalCache, StopIncrementWhenOverLimit: v.StopIncrement,
		ShadowMode: v.ShadowMode, QuotaMode: v.QuotaMode, Headers: header.Off}
	if v.Headers == "envoy" {
		opts.Headers, opts.HeaderNames = header.Legacy, header.EnvoyNames
		if len(v.HeaderNames) == 3 {
			opts.HeaderNames.Limit, opts.HeaderNames.Remaining, opts.HeaderNames.Reset = v.HeaderNames[0], v.HeaderNames[1], v.HeaderNames[2]
		}
	}
	srv, err := rls.New(store, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.Load(dir); err != nil {
		t.Fatal(err)
	}
	client := replayClient(t, srv)
	stats := map[string]uint64{}
	tagSuffix := ""
	if len(v.StatsdTags) > 0 {
		var ks []string
		for k := range v.StatsdTags {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			tagSuffix += ".__" + k + "=" + v.StatsdTags[k]
		}
	}

	for si, st := range sc.Steps {
		if len(st.Only) > 0 && !contains(st.Only, v.Name) {
			continue
		}
		where := fmt.Sprintf("step %d", si+1)
		if st.Note != "" {
			where += " (" + st.Note + ")"
		}
		if st.Advance != "" {
			d, err := time.ParseDuration(st.Advance)
			if err != nil {
				t.Fatalf("%s: advance: %v", where, err)
			}
			now = now.Add(d)
		}
		if st.Write != "" {
			copyFile(t, filepath.Join("testdata", "upstream", "reload", st.Write), filepath.Join(dir, st.Write))
		}
		if st.Remove != "" {
			if err := os.Remove(filepath.Join(dir, st.Remove)); err != nil {
				t.Fatal(err)
			}
		}
		if st.Load != nil {
			if err := srv.Load(dir); (err == nil) != *st.Load {
				t.Errorf("%s: Load = %v, want loaded %v", where, err, *st.Load)
			}
		}
		if st.Send != nil || st.Domain != "" {
			times := max(1, st.Times)
			for i := range times {
				replaySend(t, fmt.Sprintf("%s, repetition %d", where, i+1), client, st, i)
			}
		}
		if len(st.Stats) > 0 {
			sd.Flush()
			for _, ln := range l.read(t) {
				name, rest, _ := strings.Cut(ln, ":")
				val, typ, _ := strings.Cut(rest, "|")
				n, _ := strconv.ParseUint(val, 10, 64)
				name = strings.TrimSuffix(name, tagSuffix)
				if typ == "c" {
					stats[name] += n
				} else {
					stats[name] = n
				}
			}
			for name, want := range st.Stats {
				if got := stats[name]; got != want {
					t.Errorf("%s: stat %s%s = %d, want %d", where, name, tagSuffix, got, want)
				}
			}
		}
	}
}

func replaySend(t *testing.T, where string, client pb.RateLimitServiceClient, st replayStep, i int) {
	t.Helper()
	req := &pb.RateLimitRequest{Domain: st.Domain, HitsAddend: 1}
	if st.Hits != nil {
		req.HitsAddend = *st.Hits
	}
	for _, d := range st.Send {
		desc := &commonpb.RateLimitDescriptor{}
		for _, e := range d {
			desc.Entries = append(desc.Entries, &commonpb.RateLimitDescriptor_Entry{
				Key: e[0], Value: strings.ReplaceAll(e[1], "{i}", strconv.Itoa(i))})
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	resp, err := client.ShouldRateLimit(context.Background(), req)
	x := st.Expect
	if x == nil {
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		return
	}
	if x.Error != "" {
		s, _ := status.FromError(err)
		if err == nil || s.Code().String() != x.Error || !strings.Contains(s.Message(), x.Message) {
			t.Errorf("%s: error %v, want %s containing %q", where, err, x.Error, x.Message)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if got := resp.OverallCode.String(); got != x.Overall {
		t.Errorf("%s: overall_code %s, want %s", where, got, x.Overall)
	}
	if len(resp.Statuses) != len(x.Statuses) {
		t.Fatalf("%s: %d statuses, want %d", where, len(resp.Statuses), len(x.Statuses))
	}
	for j, ws := range x.Statuses {
		gs := resp.Statuses[j]
		if gs.Code.String() != ws.Code {
			t.Errorf("%s: status %d code %s, want %s", where, j, gs.Code, ws.Code)
		}
		limit := ""
		if cl := gs.CurrentLimit; cl != nil {
			limit = fmt.Sprintf("%d/%s", cl.RequestsPerUnit, cl.Unit)
			if cl.Name != ws.Name {
				t.Errorf("%s: status %d limit name %q, want %q", where, j, cl.Name, ws.Name)
			}
		}
		if limit != ws.Limit {
			t.Errorf("%s: status %d current_limit %q, want %q", where, j, limit, ws.Limit)
		}
		if want := ws.Remaining + int64(i)*ws.RemainingStep; int64(gs.LimitRemaining) != want {
			t.Errorf("%s: status %d limit_remaining %d, want %d", where, j, gs.LimitRemaining, want)
		}
		if ws.Reset != nil && gs.DurationUntilReset.GetSeconds() != *ws.Reset {
			t.Errorf("%s: status %d duration_until_reset %ds, want %ds", where, j, gs.DurationUntilReset.GetSeconds(), *ws.Reset)
		}
	}
	if x.Headers != nil {
		var got [][2]string
		for _, h := range resp.ResponseHeadersToAdd {
			got = append(got, [2]string{h.Key, h.Value})
		}
		if fmt.Sprint(got) != fmt.Sprint(x.Headers) {
			t.Errorf("%s: response_headers_to_add %v, want %v", where, got, x.Headers)
		}
	}
}

// replayClient serves srv with grpc-go on 127.0.0.1 and returns a client.
func replayClient(t *testing.T, srv *rls.Server) pb.RateLimitServiceClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(rls.ServerOptions()...)
	srv.Register(g)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
