package dist

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicehq/sluice/bench/internal/gobuild"
	"github.com/sluicehq/sluice/bench/rls"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// TestGubernatorMessages: a request carries the fields gubernator.proto
// numbers, and answers are read by status and error.
func TestGubernatorMessages(t *testing.T) {
	g := Gubernator(BehaviorGlobal)
	b, err := g.Request("exact", "one", 7)
	if err != nil {
		t.Fatal(err)
	}
	_, req := field(b, 1)
	if _, name := field(req, 1); string(name) != "exact" {
		t.Errorf("name %q", name)
	}
	if _, key := field(req, 2); string(key) != "one" {
		t.Errorf("unique_key %q", key)
	}
	for num, want := range map[protowire.Number]uint64{3: 1, 4: 7, 5: 1000, 7: BehaviorGlobal} {
		if v, _ := field(req, num); v != want {
			t.Errorf("field %d = %d, want %d", num, v, want)
		}
	}
	resp := func(inner []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), inner)
	}
	over := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)
	failed := protowire.AppendString(protowire.AppendTag(nil, 5, protowire.BytesType), "boom")
	for _, c := range []struct {
		resp    []byte
		ok, err bool
	}{{resp(nil), true, false}, {resp(over), false, false}, {resp(failed), false, true}, {nil, false, true}} {
		ok, err := decodeGubernator(c.resp)
		if ok != c.ok || (err != nil) != c.err {
			t.Errorf("Decode(%x) = %v, %v; want %v, error %v", c.resp, ok, err, c.ok, c.err)
		}
	}
}

// TestContenders (BENCH_GUBERNATOR=1: it builds gubernator from the Go
// module proxy the first time) starts both contenders on loopback, sends
// each a short load, and checks that every call is answered, the
// throughput load is all admitted, and sluice (rls and serve) admits no
// more than its limit on one key hammered through all its instances.
func TestContenders(t *testing.T) {
	if os.Getenv("BENCH_GUBERNATOR") != "1" {
		t.Skip("set BENCH_GUBERNATOR=1 to build and run gubernator")
	}
	redistest.Require(t)
	ctx := context.Background()
	cache, err := gobuild.Cache()
	if err != nil {
		t.Fatal(err)
	}
	gbin, err := gobuild.Gubernator.Build(ctx, cache, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sbin, err := rls.BuildSluice(ctx, filepath.Join("..", ".."), dir)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 50
	if err := SluiceConfig(dir, limit); err != nil {
		t.Fatal(err)
	}
	r := redistest.Start(t)
	g, err := StartGubernators(ctx, gbin, GubernatorPeers, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop()
	s, err := StartSluices(ctx, sbin, dir, r.Addr, r.Pid(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	sv, err := StartServes(ctx, sbin, dir, r.Addr, r.Pid(), 2, limit)
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Stop()
	for i, set := range []*Set{g, g.WithBehavior(BehaviorGlobal), s, sv} {
		l := Load{Callers: 4, Conns: 3, Duration: 300 * time.Millisecond, Key: "load", Keys: 100, Limit: 1_000_000_000, Prefix: fmt.Sprintf("t%d-", i)}
		res, err := Measure(ctx, set, l)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(res)
		if res.Errors > 0 || res.Decisions == 0 || res.Admitted != res.Decisions {
			t.Errorf("%s: %d decisions, %d admitted, %d errors (%v)", set.Name, res.Decisions, res.Admitted, res.Errors, res.FirstErr)
		}
		l.Key, l.Keys, l.Limit, l.Prefix = "exact", 1, limit, fmt.Sprintf("x%d-", i) // counters of its own: gubernator's two sets share peers
		if res, err = Measure(ctx, set, l); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s exactness: %d decisions, %d admitted, %d allowed", set.Name, res.Decisions, res.Admitted, res.Allowed(limit))
		if res.Errors > 0 || res.Admitted == 0 {
			t.Errorf("%s: %d admitted, %d errors (%v)", set.Name, res.Admitted, res.Errors, res.FirstErr)
		}
		if (set == s || set == sv) && res.Admitted > res.Allowed(limit) {
			t.Errorf("%s admitted %d, more than %d", set.Name, res.Admitted, res.Allowed(limit))
		}
	}
}

func TestMain(m *testing.M) { redistest.Main(m) }

// TestMedian: each metric is the median of its own, the CPU scaled to the
// median round's decisions.
func TestMedian(t *testing.T) {
	rs := []Result{
		{Decisions: 100, Elapsed: time.Second, CPU: 300 * time.Millisecond, P50: 3, P99: 30},
		{Decisions: 300, Elapsed: time.Second, CPU: 300 * time.Millisecond, P50: 1, P99: 10},
		{Decisions: 200, Elapsed: time.Second, CPU: 1000 * time.Millisecond, P50: 2, P99: 20},
	}
	m := Median(rs)
	// CPU a decision: 3 ms, 1 ms, 5 ms; median 3 ms, times 200 decisions.
	if m.Decisions != 200 || m.CPU != 600*time.Millisecond || m.P50 != 2 || m.P99 != 20 {
		t.Errorf("Median = %d decisions, CPU %v, p50 %v, p99 %v; want 200, 600ms, 2ns, 20ns", m.Decisions, m.CPU, m.P50, m.P99)
	}
}
