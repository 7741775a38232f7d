package sim

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// Scenario is one simulation, as "sluice sim NAME" runs it: a name, a
// line that says what it shows, and its own flags.
type Scenario struct {
	Name    string
	Summary string
	flags   func(fs *flag.FlagSet) func(Options) (*Result, error)
}

// Options are what every scenario takes besides its own flags.
type Options struct {
	Seed uint64 // the same seed gives the same bytes
	Runs int    // independent runs to average; 0 means the scenario's default
	// Progress, when set, is called as the runs of a long scenario finish,
	// with the runs done and the total. Calls are serialized.
	Progress func(done, total int)
	// Log, when set, gets a line as each step of a long scenario starts.
	Log io.Writer
}

// Result is the outcome of a scenario: a table and a figure.
type Result struct {
	r interface {
		Table() table
		Figure() figure
	}
}

// WriteTable prints the result's table to w in format: "table" (aligned
// text for people), "json" (an array of objects whose keys are the column
// names, in column order) or "csv" (a header line of column names, then
// one line per row). The same result always prints the same bytes. An
// unknown format is [ErrFormat].
func (r *Result) WriteTable(w io.Writer, format string) error { return r.r.Table().Write(w, format) }

// WriteSVG draws the result's figure as a standalone SVG document, with
// the standard library only; the output depends only on the result.
func (r *Result) WriteSVG(w io.Writer) error { return r.r.Figure().WriteSVG(w) }

// Scenarios returns every scenario, in the order "sluice sim --help" lists
// them.
func Scenarios() []Scenario {
	return []Scenario{
		{"brooker", "Brooker's backoff and jitter study: N clients, one row, optimistic concurrency", brookerFlags},
		{"objectstore", "the object-store example: 9 writes into a budget of 5 per tick, with backoff and retrying at once", objectStoreFlags},
		{"aimd", "an AIMD client against a server whose capacity is hidden and changes", aimdFlags},
		{"buckets", "one bursty trace through token bucket, leaky queue, fixed and sliding windows", bucketsFlags},
		{"windows", "sliding window counter vs the exact log: wrong decisions and the gap", windowsFlags},
		{"overload", "adaptive concurrency at 0.5x, 2x, 5x of capacity, halved, restored (--cpu: a real server)", overloadFlagsOf},
		{"regions", "two regions: a Redis per region (up to 2x) vs a home region per key (exact, cross-region latency)", regionsFlags},
	}
}

// Lookup returns the scenario called name, and whether there is one.
func Lookup(name string) (Scenario, bool) {
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, true
		}
	}
	return Scenario{}, false
}

// Flags defines the scenario's own flags on fs and returns the function
// that runs it once fs has parsed them. That function refuses flag values
// that make no sense with an error that names the flag. A nil Result with
// a nil error means the scenario printed its own output (the CPU server of
// "overload --cpu", which is this program run again).
func (s Scenario) Flags(fs *flag.FlagSet) func(Options) (*Result, error) { return s.flags(fs) }

func brookerFlags(fs *flag.FlagSet) func(Options) (*Result, error) {
	clients := intList{}
	fs.Var(&clients, "clients", "comma-separated numbers of clients (default 10,20,…,190)")
	strategies := stringList{}
	fs.Var(&strategies, "strategies", "comma-separated strategies (default all: "+strings.Join(brookerStrategies(), ",")+")")
	base := fs.Duration("base", 5*time.Millisecond, "backoff base")
	maxd := fs.Duration("cap", 2*time.Second, "backoff cap")
	return func(c Options) (*Result, error) {
		if err := positive("--base", *base, "--cap", *maxd); err != nil {
			return nil, err
		}
		if *maxd < *base {
			return nil, fmt.Errorf("--cap %v is below --base %v", *maxd, *base)
		}
		return result(run(brooker, brookerOptions{Seed: c.Seed, Runs: c.Runs, Clients: clients,
			Strategies: strategies, Base: *base, Cap: *maxd, Progress: c.Progress}))
	}
}

// run runs scenario f on o with its defaults filled in: o.withDefaults,
// which refuses options that make no sense, is the one way into every
// scenario, so f sees only options it accepted.
func run[O interface{ withDefaults() (O, error) }, R any](f func(O) (R, error), o O) (R, error) {
	o, err := o.withDefaults()
	if err != nil {
		var zero R
		return zero, err
	}
	return f(o)
}

// result wraps the outcome of a scenario's function.
func result[R interface {
	Table() table
	Figure() figure
}](r R, err error) (*Result, error) {
	if err != nil {
		return nil, err
	}
	return &Result{r}, nil
}

func objectStoreFlags(fs *flag.FlagSet) func(Options) (*Result, error) {
	requests := fs.Int("requests", 9, "writes fired at once")
	budget := fs.Int("budget", 5, "writes the prefix accepts per tick")
	tick := fs.Duration("tick", 100*time.Millisecond, "the store's tick")
	base := fs.Duration("base", 100*time.Millisecond, "first backoff (then doubling, plus up to as much jitter)")
	attempts := fs.Int("max-attempts", 6, "tries per write, the first included")
	return func(c Options) (*Result, error) {
		if err := atLeastOne("--requests", *requests, "--budget", *budget, "--max-attempts", *attempts); err != nil {
			return nil, err
		}
		if err := positive("--tick", *tick, "--base", *base); err != nil {
			return nil, err
		}
		return result(run(objectStore, objectStoreOptions{Seed: c.Seed, Runs: c.Runs, Requests: *requests,
			Budget: *budget, Tick: *tick, Base: *base, MaxAttempts: *attempts}))
	}
}

func aimdFlags(fs *flag.FlagSet) func(Options) (*Result, error) {
	var phases phaseList
	fs.Var(&phases, "phases", "hidden capacity as START:LIMIT,… e.g. 0s:40,60s:100 (default 0s:40,60s:100,120s:25,180s:60)")
	duration := fs.Duration("duration", 0, "length of the run (default 60s after the last phase starts)")
	return func(c Options) (*Result, error) {
		if *duration < 0 {
			return nil, fmt.Errorf("--duration %v is negative", *duration)
		}
		for i, p := range phases {
			switch {
			case p.Start < 0:
				return nil, fmt.Errorf("--phases: phase %d starts at %v, before 0s", i+1, p.Start)
			case p.Limit < 1:
				return nil, fmt.Errorf("--phases: phase %d has limit %d: want at least 1", i+1, p.Limit)
			case i > 0 && p.Start <= phases[i-1].Start:
				return nil, fmt.Errorf("--phases: phase %d starts at %v, not after phase %d (%v)", i+1, p.Start, i, phases[i-1].Start)
			}
		}
		return result(run(aimd, aimdOptions{Seed: c.Seed, Runs: c.Runs, Phases: phases, Duration: *duration}))
	}
}

func bucketsFlags(fs *flag.FlagSet) func(Options) (*Result, error) {
	rate := fs.Int64("rate", 10, "the limit, per second")
	burst := fs.Int64("burst", 0, "token bucket capacity and leaky queue length (default the rate)")
	background := fs.Float64("background", 4, "Poisson arrivals per second besides the bursts")
	return func(c Options) (*Result, error) {
		if c.Runs > 1 {
			return nil, errors.New("buckets runs one trace: --runs does not apply")
		}
		switch {
		case *rate < 1:
			return nil, fmt.Errorf("--rate %d: want at least 1", *rate)
		case *burst < 0:
			return nil, fmt.Errorf("--burst %d is negative (0: the rate)", *burst)
		case *background < 0 || *background != *background:
			return nil, fmt.Errorf("--background %v: want 0 or more", *background)
		}
		return result(run(buckets, bucketsOptions{Seed: c.Seed, Rate: *rate, Burst: *burst, Background: *background}))
	}
}

func windowsFlags(fs *flag.FlagSet) func(Options) (*Result, error) {
	sources := fs.Int("sources", 200, "sources, each a Poisson stream with its own key")
	rate := fs.Int64("rate", 100, "the limit: requests per --period")
	period := fs.Duration("period", time.Minute, "the limit's window")
	duration := fs.Duration("duration", time.Hour, "length of the trace")
	return func(c Options) (*Result, error) {
		if c.Runs > 1 {
			return nil, errors.New("windows runs one trace: --runs does not apply")
		}
		if err := atLeastOne("--sources", *sources, "--rate", int(min(*rate, 1<<30))); err != nil {
			return nil, err
		}
		if err := positive("--period", *period, "--duration", *duration); err != nil {
			return nil, err
		}
		return result(run(windows, windowsOptions{Seed: c.Seed, Sources: *sources,
			Limit: ratelimit.Limit{Rate: *rate, Period: *period}, Duration: *duration}))
	}
}

// regionsFlags is the two-region design of docs/scale.md, each region
// with its own Redis against a home region per key.
func regionsFlags(fs *flag.FlagSet) func(Options) (*Result, error) {
	keys := fs.Int("keys", 40, "clients per scenario, each with its own key")
	rate := fs.Int64("rate", 1000, "the limit: requests per --period")
	period := fs.Duration("period", time.Minute, "the limit's period")
	burst := fs.Int64("burst", 200, "the limit's burst (a token bucket)")
	duration := fs.Duration("duration", 5*time.Minute, "length of the steady scenarios")
	local := fs.Duration("local-rtt", time.Millisecond, "round trip from a gateway to its region's Redis")
	cross := fs.Duration("cross-rtt", 70*time.Millisecond, "round trip between the two regions")
	return func(c Options) (*Result, error) {
		if c.Runs > 1 {
			return nil, errors.New("regions averages over --keys: --runs does not apply")
		}
		if err := atLeastOne("--keys", *keys); err != nil {
			return nil, err
		}
		if err := positive("--period", *period, "--duration", *duration, "--local-rtt", *local, "--cross-rtt", *cross); err != nil {
			return nil, err
		}
		return result(run(regions, regionsOptions{Seed: c.Seed, Keys: *keys, Duration: *duration,
			Limit:    ratelimit.Limit{Rate: *rate, Period: *period, Burst: *burst},
			LocalRTT: *local, CrossRTT: *cross}))
	}
}

// intList is a comma-separated list of positive integers.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive integer", f)
		}
		*l = append(*l, n)
	}
	return nil
}

// stringList is a comma-separated list of words.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*l = append(*l, f)
		}
	}
	return nil
}

// phaseList is a comma-separated list of START:LIMIT phases.
type phaseList []aimdPhase

func (l *phaseList) String() string {
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = fmt.Sprintf("%v:%d", p.Start, p.Limit)
	}
	return strings.Join(s, ",")
}

func (l *phaseList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		start, limit, ok := strings.Cut(strings.TrimSpace(f), ":")
		if !ok {
			return fmt.Errorf("%q: want START:LIMIT, e.g. 60s:100", f)
		}
		d, err := time.ParseDuration(start)
		if err != nil {
			return fmt.Errorf("%q: %v", f, err)
		}
		n, err := strconv.ParseInt(limit, 10, 64)
		if err != nil {
			return fmt.Errorf("%q: limit %q is not an integer", f, limit)
		}
		*l = append(*l, aimdPhase{Start: d, Limit: n})
	}
	return nil
}

// atLeastOne checks flag values given as name, value pairs.
func atLeastOne(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v := pairs[i+1].(int); v < 1 {
			return fmt.Errorf("%s %d: want at least 1", pairs[i], v)
		}
	}
	return nil
}

// positive checks duration flags given as name, value pairs.
func positive(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v := pairs[i+1].(time.Duration); v <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", pairs[i], v)
		}
	}
	return nil
}

// orDefault sets *v to d when *v is zero or negative: an option left out
// takes the scenario's default.
func orDefault[T ~int | ~int64 | ~float64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
