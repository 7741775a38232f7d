package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

// ScaleTarget is one Redis deployment the cluster scaling bench drives: a
// Redis Cluster of Primaries primaries, or (Primaries 0) a standalone
// redis-server, the reference without cluster routing.
type ScaleTarget struct {
	Name      string
	Primaries int
	Nodes     []*redistest.Server
	Ranges    []SlotRange // the primaries' slots, from CLUSTER SLOTS; nil for standalone
	URL       string
	stores    map[string]ratelimit.Store
	closers   []func() error
	stop      func()
}

// Pids returns the process IDs of the target's redis-server processes.
func (t *ScaleTarget) Pids() []int {
	out := make([]int, len(t.Nodes))
	for i, n := range t.Nodes {
		out[i] = n.Pid()
	}
	return out
}

// Close closes the target's stores and stops its servers.
func (t *ScaleTarget) Close() {
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i]()
	}
	t.closers = nil
	if t.stop != nil {
		t.stop()
	}
}

// StartScaleTargets starts a Redis Cluster of each size in primaries (0: a
// standalone redis-server), on loopback ports, each primary without
// replicas. The caller must Close each target.
func StartScaleTargets(primaries []int) ([]*ScaleTarget, error) {
	var out []*ScaleTarget
	fail := func(err error) ([]*ScaleTarget, error) {
		for _, t := range out {
			t.Close()
		}
		return nil, err
	}
	for _, p := range primaries {
		t := &ScaleTarget{Primaries: p, stores: map[string]ratelimit.Store{}}
		if p == 0 {
			s, err := redistest.StartServer()
			if err != nil {
				return fail(err)
			}
			t.Name, t.Nodes, t.URL, t.stop = "standalone", []*redistest.Server{s}, s.URL(), s.Close
			out = append(out, t)
			continue
		}
		c, err := redistest.StartClusterProcess(p)
		if err != nil {
			return fail(err)
		}
		t.Name, t.Nodes, t.URL, t.stop = fmt.Sprintf("cluster %d", p), c.Nodes, c.URL(), c.Close
		out = append(out, t)
		if t.Ranges, err = clusterSlots(c); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// clusterSlots asks the cluster which primary serves which slots.
func clusterSlots(c *redistest.Cluster) ([]SlotRange, error) {
	v, err := c.Nodes[0].Do("CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	var out []SlotRange
	rows, _ := v.([]any)
	for _, r := range rows {
		r, _ := r.([]any)
		if len(r) < 3 {
			continue
		}
		lo, _ := r[0].(int64)
		hi, _ := r[1].(int64)
		master, _ := r[2].([]any)
		if len(master) < 2 {
			continue
		}
		port, _ := master[1].(int64)
		node := slices.IndexFunc(c.Nodes, func(s *redistest.Server) bool { return int64(s.Port) == port })
		if node < 0 {
			return nil, fmt.Errorf("CLUSTER SLOTS names port %d, not a node of the cluster", port)
		}
		out = append(out, SlotRange{int(lo), int(hi), node})
	}
	total := 0
	for _, r := range out {
		total += r.Hi - r.Lo + 1
	}
	if total != 16384 {
		return nil, fmt.Errorf("CLUSTER SLOTS covers %d slots, not 16384", total)
	}
	return out, nil
}

// Store returns the target's exact store, which RunScale opens (nil
// before): its Key names keys in Redis as every mode does.
func (t *ScaleTarget) Store() *redisstore.Store {
	s, _ := t.stores["exact"].(*redisstore.Store)
	return s
}

// ScaleModes are the store modes the bench can drive: exact (Store.Apply,
// the default) and prefetched (NewPrefetch over the same store, default
// PrefetchOptions).
var ScaleModes = []string{"exact", "prefetched"}

// store returns the target's store for mode, opening it on first use.
func (t *ScaleTarget) store(ctx context.Context, mode string, pipeline int) (ratelimit.Store, *redisstore.Store, error) {
	base, _ := t.stores["exact"].(*redisstore.Store)
	if base == nil {
		// A long timeout: this measures throughput, and a loaded
		// machine's slow reply must not become an error.
		s, err := redisstore.Open(ctx, t.URL, redisstore.Options{Timeout: 5 * time.Second, Pipeline: pipeline, RequireAtStart: true})
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		t.stores["exact"], base = s, s
		t.closers = append(t.closers, s.Close)
	}
	if st, ok := t.stores[mode]; ok {
		return st, base, nil
	}
	switch mode {
	case "prefetched":
		l, err := redisstore.NewPrefetch(base, redisstore.PrefetchOptions{})
		if err != nil {
			return nil, nil, err
		}
		t.stores[mode] = l
		t.closers = append(t.closers, l.Close)
		return l, base, nil
	}
	return nil, nil, fmt.Errorf("unknown mode %q (want one of %v)", mode, ScaleModes)
}

// ScaleConfig is what RunScale measures.
type ScaleConfig struct {
	Rounds   int           // each round measures every target and mode once
	Duration time.Duration // measured, per target and mode and round
	Warmup   time.Duration // run, not measured, before each measurement
	Callers  int           // goroutines calling Apply as fast as decisions come back
	Keys     []ClusterKey  // each call picks one uniformly at random
	Modes    []string      // of ScaleModes
	Pipeline int           // redisstore Options.Pipeline (0: the default)
	Progress io.Writer     // a line per measurement; nil for none
}

// ScaleResult is one measurement: one target, one mode, one round.
type ScaleResult struct {
	Target   *ScaleTarget
	Mode     string
	Round    int
	Result                   // ServerCPU is the sum over the target's nodes
	NodeCPU  []time.Duration // each node's CPU during the measurement (/proc/<pid>/stat)
	NodeKeys []int64         // each node's DBSIZE after it
	// CommandTime is the time the nodes spent running scripts and
	// transactions (INFO commandstats, reset before the measurement).
	// It is wall time: on a quiet machine ServerCPU less this is the
	// event loop's and the network's share; on a loaded one it includes
	// the time other processes took the CPU mid-command.
	CommandTime time.Duration
	Calls       uint64 // script calls the store sent (Store.Stats)
	Requests    uint64 // requests they carried
}

// RunScale measures every target in every mode, cfg.Rounds times,
// alternating the targets' order from round to round (1, 2, 3, then 3, 2,
// 1, …) so that each sees the same machine on average. Before each
// measurement the target's data is flushed and the callers run for
// cfg.Warmup unmeasured.
func RunScale(ctx context.Context, targets []*ScaleTarget, cfg ScaleConfig) ([]ScaleResult, error) {
	if cfg.Callers < 1 || cfg.Rounds < 1 || cfg.Duration <= 0 || len(cfg.Keys) == 0 || len(cfg.Modes) == 0 {
		return nil, fmt.Errorf("scale config needs callers, rounds, a duration, keys and modes: %+v", cfg)
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	keys := cfg.Keys
	op := func(st ratelimit.Store) Op {
		return func(ctx context.Context, rng *rand.Rand) (bool, error) {
			k := &keys[rng.IntN(len(keys))]
			d, err := st.Apply(ctx, ratelimit.Request{Key: k.Key, Limit: k.Limit, Algorithm: k.Algorithm, N: 1})
			return d.Allowed, err
		}
	}
	var out []ScaleResult
	for round := range cfg.Rounds {
		order := slices.Clone(targets)
		modes := slices.Clone(cfg.Modes)
		if round%2 == 1 {
			slices.Reverse(order)
			slices.Reverse(modes)
		}
		for _, t := range order {
			for _, mode := range modes {
				st, base, err := t.store(ctx, mode, cfg.Pipeline)
				if err != nil {
					return out, err
				}
				for _, n := range t.Nodes {
					if _, err := n.Do("FLUSHALL"); err != nil {
						return out, fmt.Errorf("%s: FLUSHALL on %s: %w", t.Name, n.Addr, err)
					}
				}
				if cfg.Warmup > 0 {
					Measure(ctx, "warmup", cfg.Callers, cfg.Warmup, op(st))
				}
				for _, n := range t.Nodes {
					if _, err := n.Do("CONFIG", "RESETSTAT"); err != nil {
						return out, fmt.Errorf("%s: CONFIG RESETSTAT on %s: %w", t.Name, n.Addr, err)
					}
				}
				cpu0, err := nodeCPU(t)
				if err != nil {
					return out, err
				}
				s0 := base.Stats()
				res := Measure(ctx, t.Name+" "+mode, cfg.Callers, cfg.Duration, op(st))
				s1 := base.Stats()
				cpu1, err := nodeCPU(t)
				if err != nil {
					return out, err
				}
				r := ScaleResult{Target: t, Mode: mode, Round: round, Result: res, Calls: s1.ScriptCalls - s0.ScriptCalls, Requests: s1.Requests - s0.Requests}
				for i := range cpu0 {
					r.NodeCPU = append(r.NodeCPU, cpu1[i]-cpu0[i])
					r.ServerCPU += cpu1[i] - cpu0[i]
				}
				r.Latencies = nil // the percentiles are kept; pooling uses them per round
				for _, n := range t.Nodes {
					usec, err := commandUsec(n)
					if err != nil {
						return out, fmt.Errorf("%s: %w", t.Name, err)
					}
					r.CommandTime += usec
					v, err := n.Do("DBSIZE")
					if err != nil {
						return out, fmt.Errorf("%s: DBSIZE on %s: %w", t.Name, n.Addr, err)
					}
					k, _ := v.(int64)
					r.NodeKeys = append(r.NodeKeys, k)
				}
				fmt.Fprintf(progress, "round %d/%d %-11s %-6s %8.0f decisions/s  redis CPU %5.2f µs/decision (%s; script wall %5.2f µs)  client %5.2f µs  batch %5.1f  errors %d\n",
					round+1, cfg.Rounds, t.Name, mode, res.PerSecond(), perDecision(r.ServerCPU, res.Decisions), cpuShares(r.NodeCPU, res.Elapsed), perDecision(r.CommandTime, res.Decisions),
					perDecision(res.ClientCPU, res.Decisions), r.Batch(), res.Errors)
				if res.FirstErr != nil {
					fmt.Fprintf(progress, "  first error: %v\n", res.FirstErr)
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// Batch returns the mean requests a script call carried.
func (r ScaleResult) Batch() float64 { return float64(r.Requests) / float64(max(1, r.Calls)) }

func perDecision(d time.Duration, n int64) float64 { return d.Seconds() * 1e6 / float64(max(1, n)) }

// cpuShares formats each node's CPU as a share of a core over elapsed.
func cpuShares(cpu []time.Duration, elapsed time.Duration) string {
	parts := make([]string, len(cpu))
	for i, c := range cpu {
		parts[i] = fmt.Sprintf("%.0f%%", 100*c.Seconds()/elapsed.Seconds())
	}
	return strings.Join(parts, " ")
}

func nodeCPU(t *ScaleTarget) ([]time.Duration, error) {
	out := make([]time.Duration, len(t.Nodes))
	for i, n := range t.Nodes {
		d, err := ProcCPU(n.Pid())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		out[i] = d
	}
	return out, nil
}

// ClockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// Linux's every architecture that Go supports).
const ClockTick = 10 * time.Millisecond

// ProcCPU returns the CPU time process pid has used, user and system
// (utime + stime of /proc/<pid>/stat, in ClockTick units).
func ProcCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, errors.New("ProcCPU: no process")
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime + stime from the text of /proc/<pid>/stat. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses, so the fields are counted from the last ")".
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("ProcCPU: no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("ProcCPU: %d fields after the command name, want at least 13", len(f))
	}
	var total int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 || v > 1<<40 { // 1<<40 ticks: 348 years
			return 0, fmt.Errorf("ProcCPU: bad time %q", s)
		}
		total += v
	}
	return time.Duration(total) * ClockTick, nil
}

// commandUsec returns the time node n spent running scripts and
// transactions since its last CONFIG RESETSTAT (parseCommandUsec).
func commandUsec(n *redistest.Server) (time.Duration, error) {
	v, err := n.Do("INFO", "commandstats")
	if err != nil {
		return 0, fmt.Errorf("INFO commandstats on %s: %w", n.Addr, err)
	}
	info, _ := v.(string)
	return parseCommandUsec(info), nil
}

// parseCommandUsec sums the usec fields of INFO commandstats for the
// commands a client sends that run others (EVALSHA, EVAL, EXEC, FCALL,
// and their _ro forms: "cmdstat_evalsha:calls=3,usec=42,…"). The commands
// they run are counted in their own lines too, so the others are left
// out rather than counted twice.
func parseCommandUsec(info string) time.Duration {
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, _, _ := strings.Cut(line, ":")
		switch strings.TrimSuffix(name, "_ro") {
		case "cmdstat_evalsha", "cmdstat_eval", "cmdstat_exec", "cmdstat_fcall":
		default:
			continue
		}
		_, fields, _ := strings.Cut(line, ":")
		for _, f := range strings.Split(strings.TrimSpace(fields), ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 && n < 1<<40 {
					total += n
				}
			}
		}
	}
	return time.Duration(total) * time.Microsecond
}
