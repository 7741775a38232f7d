package rls_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/sluicehq/sluice/bench/rls"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// The protoset ghz reads holds rls.proto with every import, dependencies
// first, so that it links on its own and names the method ghz calls.
func TestProtoset(t *testing.T) {
	b, err := rls.Protoset()
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		t.Fatalf("the protoset does not link: %v", err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(rls.ShouldRateLimit))
	if err != nil {
		t.Fatalf("%s: %v", rls.ShouldRateLimit, err)
	}
	if _, ok := d.(protoreflect.MethodDescriptor); !ok {
		t.Fatalf("%s is a %T, not a method", rls.ShouldRateLimit, d)
	}
	if last := set.File[len(set.File)-1].GetName(); last != "envoy/service/ratelimit/v3/rls.proto" {
		t.Errorf("last file %s, want rls.proto after its imports", last)
	}
}

func TestParseFractions(t *testing.T) {
	got, err := rls.ParseFractions("10, 25,50,100")
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.1, 0.25, 0.5, 1}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	for _, bad := range []string{"10x", "-5", "0", "1e9", "NaN", "ten"} {
		if _, err := rls.ParseFractions(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseFractions(f *testing.F) {
	for _, s := range []string{"10,25,50,100", "", ",", "1e3", "0.5", "NaN", "10,,20", "Inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs, err := rls.ParseFractions(s)
		if err != nil {
			return
		}
		for _, v := range fs {
			if !(v > 0 && v <= 10) {
				t.Fatalf("%q gave %v", s, v)
			}
		}
	})
}

// TestSweep runs the sweep's short form on two sluice rls servers (memory
// as the reference, Redis), with the project's client and, when it is
// installed already (rls-sweep installs it), ghz. At a fixed rate the
// client never sends ahead of its schedule.
func TestSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs sluice rls")
	}
	redistest.Require(t)
	ctx := context.Background()
	work := t.TempDir()
	sluiceBin, err := rls.BuildSluice(ctx, filepath.Join("..", ".."), work)
	if err != nil {
		t.Fatal(err)
	}
	r := redistest.Start(t)
	cfg, _ := filepath.Abs("config")
	mem, err := rls.StartSluice(ctx, sluiceBin, cfg, "memory")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Stop()
	red, err := rls.StartSluice(ctx, sluiceBin, cfg, r.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer red.Stop()

	tools := []string{rls.ToolClient}
	var ghz, protoset string
	if cache, err := os.UserCacheDir(); err == nil {
		if p := filepath.Join(cache, "sluice-bench", "ghz-"+rls.GHZVersion); fileExists(p) {
			ghz, tools = p, append(tools, rls.ToolGHZ)
			b, err := rls.Protoset()
			if err != nil {
				t.Fatal(err)
			}
			protoset = filepath.Join(work, "rls.protoset")
			if err := os.WriteFile(protoset, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	const rate = 200
	load := rls.Load{Callers: 4, Conns: 2, Keys: 100, Descriptors: 1, Duration: 500 * time.Millisecond}
	var progress strings.Builder
	started, ended := 0, 0
	points, err := rls.Sweep(ctx, rls.SweepConfig{
		Load: load, Capacity: rate, Fractions: []float64{1}, Tools: tools, Rounds: 2,
		GHZ: ghz, Protoset: protoset, Progress: &progress,
		Around: func(rls.SweepPoint, int, *rls.Proc) func() { started++; return func() { ended++ } },
		CPU:    func(pid int) (time.Duration, time.Duration) { s, _ := rls.CPUTime(pid); return s, 0 },
	}, []*rls.Proc{mem, red})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	t.Log("\n" + progress.String())
	if want := 2 * len(tools); len(points) != want {
		t.Fatalf("%d points, want %d (one rate and saturation, each tool)", len(points), want)
	}
	for _, p := range points {
		for _, name := range []string{mem.Name, red.Name} {
			rs := p.Results[name]
			if len(rs) != 2 {
				t.Fatalf("%s %s %s: %d rounds, want 2", p.Level(), p.Tool, name, len(rs))
			}
			for _, res := range rs {
				if res.Requests == 0 || res.Errors > 0 && p.Tool == rls.ToolClient {
					t.Errorf("%s %s %s: %d requests, %d errors (%v)", p.Level(), p.Tool, name, res.Requests, res.Errors, res.FirstErr)
				}
				// The schedule: request i no earlier than i/rate.
				if p.Rate > 0 && p.Tool == rls.ToolClient && float64(res.Requests) > p.Rate*res.Elapsed.Seconds()+1 {
					t.Errorf("%s %s: %d requests in %v, ahead of %v/s", p.Level(), name, res.Requests, res.Elapsed, p.Rate)
				}
			}
			if s := p.Summarize(name); s.Server <= 0 || s.P99 < s.P50 {
				t.Errorf("%s %s %s: summary %+v", p.Level(), p.Tool, name, s)
			}
		}
		if pr := p.Paired(mem.Name, red.Name); len(pr) != 2 {
			t.Errorf("%s %s: %d paired rounds, want 2", p.Level(), p.Tool, len(pr))
		}
	}
	if want := 2 * len(tools) * 2 * 2; started != want || ended != want {
		t.Errorf("Around: %d started, %d ended, want %d of each", started, ended, want)
	}
	var table strings.Builder
	rls.SweepTable(&table, points, mem.Name, []string{red.Name})
	if n := strings.Count(table.String(), "\n"); n != 2+2*len(points) {
		t.Errorf("table of %d lines, want %d:\n%s", n, 2+2*len(points), table.String())
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
