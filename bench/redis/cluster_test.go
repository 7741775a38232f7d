package redis

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestClusterScale runs the cluster bench in a tiny configuration: a
// standalone server and clusters of 1 and 2 primaries, both modes, two
// short rounds. Every decision must be an admission (the keys are far
// below their limit), the rounds must alternate, each cluster's slots
// must be split as EvenSlots says, and the stores' keys must land on
// every primary.
func TestClusterScale(t *testing.T) {
	redistest.Require(t)
	targets, err := StartScaleTargets([]int{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, tg := range targets {
			tg.Close()
		}
	}()
	for _, tg := range targets {
		if tg.Primaries > 0 && !slices.Equal(tg.Ranges, EvenSlots(tg.Primaries)) {
			t.Fatalf("%s: CLUSTER SLOTS %v; want %v", tg.Name, tg.Ranges, EvenSlots(tg.Primaries))
		}
		for _, pid := range tg.Pids() {
			if _, err := ProcCPU(pid); err != nil {
				t.Fatalf("%s: %v", tg.Name, err)
			}
		}
	}
	keys, err := ClusterKeys("rules-user", 500, 1)
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	results, err := RunScale(context.Background(), targets, ScaleConfig{
		Rounds: 2, Duration: 200 * time.Millisecond, Warmup: 20 * time.Millisecond, Callers: 4,
		Keys: keys, Modes: ScaleModes, Progress: &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2*len(targets)*len(ScaleModes) {
		t.Fatalf("%d results; want %d", len(results), 2*len(targets)*len(ScaleModes))
	}
	// Round 1 runs the targets in order, round 2 in reverse.
	var names []string
	for _, r := range results {
		names = append(names, r.Target.Name+"/"+r.Mode)
	}
	want := []string{"standalone/exact", "standalone/prefetched", "cluster 1/exact", "cluster 1/prefetched", "cluster 2/exact", "cluster 2/prefetched",
		"cluster 2/prefetched", "cluster 2/exact", "cluster 1/prefetched", "cluster 1/exact", "standalone/prefetched", "standalone/exact"}
	if !slices.Equal(names, want) {
		t.Fatalf("order %v; want %v", names, want)
	}
	for _, r := range results {
		if r.Decisions == 0 || r.Errors != 0 || r.Allowed != r.Decisions {
			t.Fatalf("%s %s round %d: %d decisions, %d allowed, %d errors (%v)", r.Target.Name, r.Mode, r.Round, r.Decisions, r.Allowed, r.Errors, r.FirstErr)
		}
		if len(r.NodeCPU) != len(r.Target.Nodes) || len(r.NodeKeys) != len(r.Target.Nodes) {
			t.Fatalf("%s: %d CPU and %d key counts for %d nodes", r.Target.Name, len(r.NodeCPU), len(r.NodeKeys), len(r.Target.Nodes))
		}
		if r.Requests == 0 && r.Mode == "exact" {
			t.Fatalf("%s exact: the store reports no requests", r.Target.Name)
		}
		// The keys written are the keys the store names, on the
		// primaries HashSlot and CLUSTER SLOTS say: every node of the
		// 2-primary cluster holds some (the keys expire a second after
		// their bucket refills, so DBSIZE counts what was touched lately).
		var total int64
		for _, n := range r.NodeKeys {
			total += n
		}
		if total == 0 || total > int64(len(keys)) {
			t.Fatalf("%s %s: %d keys in Redis; want 1..%d", r.Target.Name, r.Mode, total, len(keys))
		}
		if r.Target.Primaries == 2 && slices.Contains(r.NodeKeys, 0) {
			t.Fatalf("%s: keys per node %v", r.Target.Name, r.NodeKeys)
		}
	}
	// A key the store wrote is on the node HashSlot and CLUSTER SLOTS
	// name, and on no other.
	c2 := targets[2]
	k := c2.Store().Key(keys[0].Algorithm, keys[0].Key)
	if _, err := c2.Store().Apply(context.Background(), ratelimit.Request{Key: keys[0].Key, Limit: keys[0].Limit, Algorithm: keys[0].Algorithm, N: 1}); err != nil {
		t.Fatal(err)
	}
	owner := -1
	for _, r := range c2.Ranges {
		if s := HashSlot(k); s >= r.Lo && s <= r.Hi {
			owner = r.Node
		}
	}
	for i, n := range c2.Nodes {
		v, err := n.Do("EXISTS", k)
		if i == owner && (err != nil || v != int64(1)) {
			t.Fatalf("%s not on its owner %s: %v %v", k, n.Addr, v, err)
		}
		if i != owner && err == nil {
			t.Fatalf("EXISTS %s on %s, not its owner: %v, no MOVED", k, n.Addr, v)
		}
	}

	sums := Summarize(results, "cluster 1")
	var table bytes.Buffer
	WriteScaleTable(&table, sums, "cluster 1")
	for _, row := range []string{"| standalone | exact |", "| cluster 1 | prefetched |", "| cluster 2 | exact |"} {
		if !strings.Contains(table.String(), row) {
			t.Fatalf("table lacks %q:\n%s", row, table.String())
		}
	}
	for _, s := range sums {
		if s.Rounds != 2 || len(s.PairedRate) != 2 || (s.Target.Name == "cluster 1" && Median(s.PairedRate) != 1) {
			t.Fatalf("%s %s: %d rounds, paired %v", s.Target.Name, s.Mode, s.Rounds, s.PairedRate)
		}
	}
	if !strings.Contains(progress.String(), "round 2/2 standalone") {
		t.Fatalf("progress:\n%s", progress.String())
	}
}

// TestClusterScaleCommand builds cluster-scale and runs it in a tiny
// configuration, so that CI checks the command itself.
func TestClusterScaleCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds and runs the command")
	}
	redistest.Require(t)
	bin := filepath.Join(t.TempDir(), "cluster-scale")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./cmd/cluster-scale")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	help, err := exec.Command(bin, "-help").CombinedOutput()
	if !strings.Contains(string(help), "Usage: cluster-scale") || !strings.Contains(string(help), "-primaries") {
		t.Fatalf("-help: %v\n%s", err, help)
	}
	cmd := exec.Command(bin, "-primaries", "1,2", "-standalone=false", "-rounds", "1", "-duration", "150ms", "-warmup", "0",
		"-callers", "4", "-keys", "200", "-spread-keys", "2000", "-pin=false")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"| cluster 1 | exact |", "| cluster 2 | exact |", "| rules-user | `sluice:", "| rules-ip |", "| plain |"} {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "round 1/1 cluster 2") {
		t.Fatalf("stderr has no progress:\n%s", stderr.String())
	}
	if err := exec.Command(bin, "-primaries", "x").Run(); err == nil {
		t.Fatal("-primaries x: no error")
	}
}

// TestHashSlot compares HashSlot with the server's CLUSTER KEYSLOT, on
// the key sets' keys as the store names them and on hash-tag corner cases.
func TestHashSlot(t *testing.T) {
	redistest.Require(t)
	c := redistest.StartCluster(t, 1)
	n := c.Nodes[0]
	check := []string{"", "a", "{", "}", "{}", "{}a", "a{}", "a{b}c", "{a}{b}", "{{a}}", "a}b{c}", "}{c}", "{a", "sluice:t{user:1}"}
	for _, set := range KeySets {
		ks, err := ClusterKeys(set, 20, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			check = append(check, k.Key, "sluice:t{"+k.Key+"}")
		}
	}
	for _, k := range check {
		v, err := n.Do("CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatal(err)
		}
		if got := HashSlot(k); int64(got) != v {
			t.Errorf("HashSlot(%q) = %d; CLUSTER KEYSLOT says %v", k, got, v)
		}
	}
}

func TestClusterKeys(t *testing.T) {
	for _, set := range KeySets {
		a, err := ClusterKeys(set, 1000, 7)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := ClusterKeys(set, 1000, 7)
		seen := map[string]bool{}
		for i, k := range a {
			if seen[k.Key] {
				t.Fatalf("%s: %q twice", set, k.Key)
			}
			seen[k.Key] = true
			if k != b[i] {
				t.Fatalf("%s: not the same for the same seed: %v, %v", set, k, b[i])
			}
			if k.Algorithm != ratelimit.TokenBucket || k.Limit.Rate != 1000 || k.Limit.Period != time.Minute || k.Limit.Burst != 200 {
				t.Fatalf("%s: %+v is not the seed's limit", set, k)
			}
		}
	}
	ks, _ := ClusterKeys("rules-user", 1, 1)
	if !strings.HasPrefix(ks[0].Key, "sl:token_bucket:60000ms:api_user_") {
		t.Fatalf("rules-user key %q", ks[0].Key)
	}
	ks, _ = ClusterKeys("rules-ip", 1, 1)
	if !strings.HasPrefix(ks[0].Key, "sl:token_bucket:60000ms:api_remote%5Faddress_") {
		t.Fatalf("rules-ip key %q", ks[0].Key)
	}
	if _, err := ClusterKeys("nope", 1, 1); err == nil {
		t.Fatal("unknown key set: no error")
	}
}

func TestSlotSpread(t *testing.T) {
	for p := 1; p <= 5; p++ {
		rs := EvenSlots(p)
		if rs[0].Lo != 0 || rs[len(rs)-1].Hi != 16383 {
			t.Fatalf("EvenSlots(%d) = %v", p, rs)
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].Lo != rs[i-1].Hi+1 || rs[i].Node != i {
				t.Fatalf("EvenSlots(%d) = %v", p, rs)
			}
		}
	}
	if got := EvenSlots(3); !slices.Equal(got, []SlotRange{{0, 5461, 0}, {5462, 10922, 1}, {10923, 16383, 2}}) {
		t.Fatalf("EvenSlots(3) = %v; want redis-cli's split", got)
	}
	// All keys on one slot: one primary holds everything.
	sp := SlotSpread([]string{"{x}1", "{x}2", "{x}3", "{x}4"}, EvenSlots(2))
	if sp.UsedSlots != 1 || sp.MaxSlot != 4 || sp.Imbalance != 2 || sp.Keys != 4 {
		t.Fatalf("one tag: %+v", sp)
	}
	// Two keys on slots of different primaries: balanced.
	a, b := "a", "b"
	for HashSlot(b) < 8192 {
		b += "b"
	}
	for HashSlot(a) >= 8192 {
		a += "a"
	}
	sp = SlotSpread([]string{a, b}, EvenSlots(2))
	if !slices.Equal(sp.PerPrimary, []int{1, 1}) || sp.Imbalance != 1 {
		t.Fatalf("balanced: %+v", sp)
	}
}

func TestParseStatCPU(t *testing.T) {
	// A command name with a space and a parenthesis; utime 250, stime 50.
	stat := "1234 (redis-server (x) 127) S 1 1234 1234 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 5 0 100 0 0"
	d, err := parseStatCPU(stat)
	if err != nil || d != 3*time.Second {
		t.Fatalf("parseStatCPU = %v, %v; want 3s", d, err)
	}
	for _, bad := range []string{"", "1234 redis", "1234 (r) S 1 2", "1234 (r) S 1 1 1 0 -1 0 0 0 0 0 x 5"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
	if d, err := ProcCPU(os.Getpid()); err != nil || d < 0 {
		t.Fatalf("ProcCPU(self) = %v, %v", d, err)
	}
}

func TestParseCommandUsec(t *testing.T) {
	// The script's own SET and TIME are inside EVALSHA's time, and the
	// PING is not a script: only EVALSHA, EVAL_RO and EXEC count.
	info := "# Commandstats\r\ncmdstat_evalsha:calls=3,usec=42,usec_per_call=14.00,rejected_calls=0,failed_calls=0\r\ncmdstat_set:calls=3,usec=9\r\n" +
		"cmdstat_time:calls=3,usec=2\r\ncmdstat_ping:calls=1,usec=1,usec_per_call=1.00\r\ncmdstat_eval_ro:calls=1,usec=5\r\ncmdstat_exec:calls=1,usec=-3,usec=7\r\nother:usec=100\r\n"
	if d := parseCommandUsec(info); d != 54*time.Microsecond {
		t.Fatalf("parseCommandUsec = %v; want 54µs", d)
	}
}

func FuzzParseStatCPU(f *testing.F) {
	f.Add("1 (a) S 1 1 1 0 -1 0 0 0 0 0 7 3 0")
	f.Add("1 (a)) b) S")
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseStatCPU(s); err == nil && d < 0 {
			t.Fatalf("negative CPU %v from %q", d, s)
		}
	})
}

func FuzzParseCommandUsec(f *testing.F) {
	f.Add("cmdstat_get:calls=1,usec=5,usec_per_call=5.00\r\n")
	f.Fuzz(func(t *testing.T, s string) { parseCommandUsec(s) })
}
