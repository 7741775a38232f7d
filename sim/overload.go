package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// IOModel is an I/O-bound service: up to Capacity requests in flight each
// take Base (times a log-normal noise factor); past it, latency grows in
// proportion to the requests in flight (processor sharing), so throughput
// stays at Capacity/Base and only latency grows. A request's latency is
// fixed when it is admitted, from the requests then in flight.
type IOModel struct {
	Capacity int           // requests in flight served at Base; 0 means 100
	Base     time.Duration // no-load latency; 0 means 20 ms
	Noise    float64       // σ of the log-normal latency factor; 0 means 0.1, negative none
	// Timeout is the client's deadline: a request slower than this is a
	// failure for the client (not goodput, and a drop for the limiter),
	// though the server works on it to the end. 0 means 1 s.
	Timeout time.Duration
}

func (m IOModel) withDefaults() IOModel {
	orDefault(&m.Capacity, 100)
	orDefault(&m.Base, 20*time.Millisecond)
	switch {
	case m.Noise == 0:
		m.Noise = 0.1
	case m.Noise < 0:
		m.Noise = 0
	}
	orDefault(&m.Timeout, time.Second)
	return m
}

// latency returns the latency of a request admitted with inflight
// requests in flight (itself included) while the server has capacity
// (a fraction of Capacity); r draws the noise.
func (m IOModel) latency(inflight int, capacity float64, r *rand.Rand) time.Duration {
	m = m.withDefaults()
	f := max(1, float64(inflight)/(float64(m.Capacity)*capacity))
	if m.Noise > 0 {
		f *= math.Exp(m.Noise * r.NormFloat64())
	}
	return time.Duration(float64(m.Base) * f)
}

// throughput returns the most requests a second the server completes at
// capacity (a fraction of Capacity).
func (m IOModel) throughput(capacity float64) float64 {
	m = m.withDefaults()
	return float64(m.Capacity) * capacity / m.Base.Seconds()
}

// overloadPhase is a stretch of the overload scenario.
type overloadPhase struct {
	Name       string        // 0.5x, 2x, 5x, halved, restored (warmup is not reported)
	Start, End time.Duration // from the start of the run
	Load       float64       // offered load, a multiple of the full capacity's throughput
	Capacity   float64       // the server's capacity, a fraction of the full one
}

// overloadPhases returns the scenario's phases: a warm-up at 0.5x, then
// 0.5x, 2x and 5x of capacity, then the capacity halved under 2x of the
// full capacity (4x of the halved one), then restored under the same
// load; phase long each.
func overloadPhases(warmup, phase time.Duration) []overloadPhase {
	ps := []overloadPhase{{"warmup", 0, warmup, 0.5, 1}}
	for _, p := range []struct {
		name       string
		load, capa float64
	}{{"0.5x", 0.5, 1}, {"2x", 2, 1}, {"5x", 5, 1}, {"halved", 2, 0.5}, {"restored", 2, 1}} {
		start := ps[len(ps)-1].End
		ps = append(ps, overloadPhase{p.name, start, start + phase, p.load, p.capa})
	}
	if warmup <= 0 {
		ps = ps[1:]
	}
	return ps
}

// phaseAt returns the index of the phase at t, or -1 past the end.
func phaseAt(ps []overloadPhase, t time.Duration) int {
	for i, p := range ps {
		if t >= p.Start && t < p.End {
			return i
		}
	}
	return -1
}

// Admitter is a concurrency limiter as the overload model drives it:
// Admit admits a request (release is then called once when the server is
// done with it, ok false if it missed the client's deadline) or refuses
// it. Limit returns the current limit, or -1 if it has none to show.
type Admitter interface {
	Admit() (release func(ok bool), admitted bool)
	Limit() int
}

// OverloadContender is one limiter of the overload scenario. New returns a
// fresh one whose clock is now; capacity returns the server's capacity
// now, in requests in flight (only the oracle may look).
type OverloadContender struct {
	Name string
	New  func(now func() time.Time, seed uint64, capacity func() int) Admitter
}

// limiterAdmitter adapts an adaptive.Limiter.
type limiterAdmitter struct{ l adaptive.Limiter }

func (a limiterAdmitter) Admit() (func(bool), bool) {
	tok, ok := a.l.Acquire()
	if !ok {
		return nil, false
	}
	return func(ok bool) {
		if ok {
			tok.Done()
		} else {
			tok.Dropped()
		}
	}, true
}

func (a limiterAdmitter) Limit() int { return a.l.Limit() }

// fixedAdmitter admits up to limit() in flight.
type fixedAdmitter struct {
	limit    func() int
	inflight int
}

func (a *fixedAdmitter) Admit() (func(bool), bool) {
	if a.limit() >= 0 && a.inflight >= a.limit() {
		return nil, false
	}
	a.inflight++
	return func(bool) { a.inflight-- }, true
}

func (a *fixedAdmitter) Limit() int { return a.limit() }

// OracleName is the reference every goodput is compared with: a fixed
// limit equal to the server's true capacity at each moment.
const OracleName = "oracle-fixed"

// OverloadContenders returns sluice's limiters with their default
// options (the probe every 30 s), the oracle, and no limit at all.
func OverloadContenders() []OverloadContender {
	return []OverloadContender{
		{"sluice-gradient", func(now func() time.Time, seed uint64, _ func() int) Admitter {
			return limiterAdmitter{adaptive.NewGradient(adaptive.GradientOptions{
				LimiterOptions: adaptive.LimiterOptions{Now: now, Seed: seed}})}
		}},
		{"sluice-vegas", func(now func() time.Time, seed uint64, _ func() int) Admitter {
			return limiterAdmitter{adaptive.NewVegas(adaptive.VegasOptions{
				LimiterOptions: adaptive.LimiterOptions{Now: now, Seed: seed}})}
		}},
		{OracleName, func(_ func() time.Time, _ uint64, capacity func() int) Admitter {
			return &fixedAdmitter{limit: capacity}
		}},
		{"none", func(func() time.Time, uint64, func() int) Admitter {
			return &fixedAdmitter{limit: func() int { return -1 }}
		}},
	}
}

// overloadOptions configures [overload]. The zero value is the default.
type overloadOptions struct {
	// The seed, the model, the phases and the contenders, as RealTime
	// takes them; its Progress is RealTime's, unused in virtual time.
	RealTimeOptions
	Progress    func(done, total int) // called as contenders finish
	SteadyAfter time.Duration         // the start of a phase left out of its p99; 0 means 2 s
	// Mix is the requests' priority classes, drawn for each arrival from a
	// PCG stream of its own, (Seed, 3) (so the arrivals and latencies are
	// the same whatever the mix); zero means defaultClassMix. Contenders
	// that are classAdmitters see the class; the rows of all show the
	// success of each class.
	Mix classMix
}

func (o overloadOptions) withDefaults() (overloadOptions, error) {
	o.Model = o.Model.withDefaults()
	switch {
	case o.Warmup == 0:
		o.Warmup = 5 * time.Second
	case o.Warmup < 0:
		o.Warmup = 0
	}
	if o.Phase == 0 {
		o.Phase = 10 * time.Second
	}
	if o.Bin == 0 {
		o.Bin = 250 * time.Millisecond
	}
	if o.SteadyAfter == 0 {
		o.SteadyAfter = min(2*time.Second, o.Phase/4)
	}
	if o.Contenders == nil {
		o.Contenders = OverloadContenders()
	}
	var err error
	if o.Mix, err = o.Mix.withDefaults(); err != nil {
		return o, err
	}
	switch {
	case o.Phase < 0 || o.Bin < 0 || o.SteadyAfter < 0:
		return o, fmt.Errorf("sim: overload: negative phase %v, bin %v or steady-after %v", o.Phase, o.Bin, o.SteadyAfter)
	case o.Bin > o.Phase:
		return o, fmt.Errorf("sim: overload: bin %v longer than a phase (%v)", o.Bin, o.Phase)
	case o.SteadyAfter >= o.Phase:
		return o, fmt.Errorf("sim: overload: steady-after %v leaves nothing of a %v phase", o.SteadyAfter, o.Phase)
	case o.Phase > time.Hour:
		return o, fmt.Errorf("sim: overload: phase %v: at most an hour", o.Phase)
	case o.Model.Capacity > 100_000:
		return o, fmt.Errorf("sim: overload: capacity %d: at most 100000", o.Model.Capacity)
	}
	oracle := false
	for _, c := range o.Contenders {
		oracle = oracle || c.Name == OracleName
	}
	if !oracle {
		return o, fmt.Errorf("sim: overload: the contenders need %s, the reference of every goodput", OracleName)
	}
	return o, nil
}

// overload runs the I/O-bound model against each contender, on the same
// arrivals (a Poisson process per phase, the same draws for all), in
// virtual time.
func overload(o overloadOptions) (*overloadResult, error) {
	phases := overloadPhases(o.Warmup, o.Phase)
	runs := make([]*runRecord, len(o.Contenders))
	parallel(len(o.Contenders), o.Progress, func(i int) {
		runs[i] = overloadRun(o, phases, o.Contenders[i])
	})
	res, err := summarize(runs, o.Bin, o.SteadyAfter)
	if err != nil {
		return nil, err
	}
	res.Throughput = o.Model.throughput(1)
	return res, nil
}

func overloadRun(o overloadOptions, phases []overloadPhase, c OverloadContender) *runRecord {
	m := o.Model
	s := newEngine(o.Seed, 1)
	noise := rand.New(rand.NewPCG(o.Seed, 2))
	classes := rand.New(rand.NewPCG(o.Seed, 3))
	run := newRunRecord(c.Name, phases, o.Bin)
	run.SetClasses(o.Mix.Classes.Names())
	end := phases[len(phases)-1].End
	inflight := 0
	capa := func() int {
		i := phaseAt(phases, s.Now())
		if i < 0 {
			i = len(phases) - 1
		}
		return max(1, int(math.Round(float64(m.Capacity)*phases[i].Capacity)))
	}
	adm := c.New(s.Time, o.Seed, capa)
	cadm, classed := adm.(classAdmitter)
	run.classed = classed
	var arrive func()
	arrive = func() {
		now := s.Now()
		i := phaseAt(phases, now)
		if i < 0 {
			return
		}
		p := phases[i]
		cl := o.Mix.draw(classes)
		var release func(bool)
		var ok bool
		if classed {
			release, ok = cadm.AdmitClass(cl)
		} else {
			release, ok = adm.Admit()
		}
		run.ArriveClass(now, int(cl), ok, inflight, capa())
		if ok {
			inflight++
			lat := m.latency(inflight, p.Capacity, noise)
			if lat <= m.Timeout {
				s.After(lat, func() {
					inflight--
					run.CompleteClass(s.Now(), now, lat, true, int(cl))
					release(true)
				})
			} else {
				s.After(m.Timeout, func() { run.CompleteClass(s.Now(), now, m.Timeout, false, int(cl)) })
				s.After(lat, func() {
					inflight--
					release(false)
				})
			}
		}
		s.After(s.Exp(time.Duration(float64(time.Second)/(p.Load*m.throughput(1)))), arrive)
	}
	s.At(0, arrive)
	for t := o.Bin; t <= end; t += o.Bin {
		s.At(t, func() { run.Sample(s.Now(), adm.Limit(), inflight) })
	}
	s.RunUntil(end)
	return run
}

// runRecord records one contender's run of the overload scenario, in
// virtual or real time: arrivals (admitted or not), completions as the
// client sees them, and a sample of the limit and the requests in flight
// at the end of each bin. It is not safe for concurrent use.
type runRecord struct {
	Name   string
	phases []overloadPhase
	bin    time.Duration
	ph     []phaseTally
	bins   []binTally
	// rejections holds how long refusals took, per phase, ns.
	rejections [][]float64
	// classes names the priority classes (nil: none recorded); cls counts
	// arrivals and successes by the phase of the arrival and class.
	classes []string
	cls     [][]classTally
	classed bool // the contender saw the classes
}

type classTally struct{ arrivals, good int }

type phaseTally struct {
	arrivals, rejected, falseRejected, good int
}

type binTally struct {
	lat             []float64 // client-seen latencies completed in the bin, ns
	good            int
	limit, inflight int
	sampled         bool
}

// newRunRecord returns an empty record for contender name.
func newRunRecord(name string, phases []overloadPhase, bin time.Duration) *runRecord {
	end := phases[len(phases)-1].End
	return &runRecord{Name: name, phases: phases, bin: bin, ph: make([]phaseTally, len(phases)),
		bins: make([]binTally, int((end+bin-1)/bin)), rejections: make([][]float64, len(phases))}
}

// SetClasses names the priority classes of the requests (first shed
// first), for ArriveClass and CompleteClass to count.
func (r *runRecord) SetClasses(names []string) {
	r.classes = names
	r.cls = make([][]classTally, len(r.phases))
	for i := range r.cls {
		r.cls[i] = make([]classTally, len(names))
	}
}

// Arrive records a request arriving at t, admitted or refused, when the
// server had inflight requests in flight and a capacity of capacity (a
// refusal under capacity is a false one).
func (r *runRecord) Arrive(t time.Duration, admitted bool, inflight, capacity int) {
	r.ArriveClass(t, -1, admitted, inflight, capacity)
}

// ArriveClass is Arrive for a request of class (an index into the names
// given to SetClasses; outside them, no class).
func (r *runRecord) ArriveClass(t time.Duration, class int, admitted bool, inflight, capacity int) {
	i := phaseAt(r.phases, t)
	if i < 0 {
		return
	}
	if class >= 0 && class < len(r.classes) {
		r.cls[i][class].arrivals++
	}
	r.ph[i].arrivals++
	if !admitted {
		r.ph[i].rejected++
		if inflight < capacity {
			r.ph[i].falseRejected++
		}
	}
}

// Complete records a response the client saw at t after latency; ok is
// false for a request that missed its deadline (latency is then the
// deadline).
func (r *runRecord) Complete(t, latency time.Duration, ok bool) {
	r.CompleteClass(t, t-latency, latency, ok, -1)
}

// CompleteClass is Complete for a request of class that arrived at
// arrived: its success counts in the phase it arrived in.
func (r *runRecord) CompleteClass(t, arrived, latency time.Duration, ok bool, class int) {
	if j := phaseAt(r.phases, arrived); ok && j >= 0 && class >= 0 && class < len(r.classes) {
		r.cls[j][class].good++
	}
	if i := phaseAt(r.phases, t); i < 0 {
		return
	} else if ok {
		r.ph[i].good++
	}
	b := &r.bins[min(int(t/r.bin), len(r.bins)-1)]
	b.lat = append(b.lat, float64(latency))
	if ok {
		b.good++
	}
}

// Sample records the limit (-1: none) and the requests in flight at t, the
// end of a bin.
func (r *runRecord) Sample(t time.Duration, limit, inflight int) {
	if t <= 0 {
		return
	}
	b := &r.bins[min(int((t-1)/r.bin), len(r.bins)-1)]
	b.limit, b.inflight, b.sampled = limit, inflight, true
}

// OverloadRow is one contender in one phase.
type OverloadRow struct {
	Limiter, Phase string
	GoodputRatio   float64 // goodput over the oracle's in the same phase; NaN if the oracle had none
	P99Ratio       float64 // P99 over the no-load p99; NaN if none completed
	// SettleS is the time from the phase's start after which every bin has
	// a p99 within 3x the no-load p99, with at least 90% of the oracle's
	// goodput from there to the phase's end; NaN if the phase ends
	// unsettled.
	SettleS         float64
	FalseRejectRate float64 // refusals while the server was under capacity, over arrivals
	RejectRate      float64 // every refusal, over arrivals
	P50Ratio        float64 // the median latency over the no-load p50; NaN if none completed
	// CriticalSuccess is, for a contender that sees the requests'
	// priority classes (the load shedders of "sluice sim overload"), the
	// share of the requests of the last class (the critical one) arriving
	// in the phase that succeeded (admitted and answered within the
	// deadline); NaN for the others.
	CriticalSuccess float64
	// ClassSuccess is the same share for every class, first shed first
	// (the table's success_<class> columns), for every contender (NaN: no
	// arrivals of that class); nil when no classes were recorded
	// (RealTime records none).
	ClassSuccess []float64
	Goodput      float64       // completed within the deadline, per second
	P99          time.Duration // of admitted requests, leaving out the start of the phase (a quarter of it, at most 2 s)
	MeanLimit    float64       // NaN when the contender shows no limit
}

// overloadResult is the outcome of [overload] (or of [summarize] on
// runs made elsewhere, in real time).
type overloadResult struct {
	Rows      []OverloadRow
	Runs      []*runRecord
	NoLoadP99 time.Duration // the oracle's p99 at 0.5x
	Bin       time.Duration
	// Throughput is the server's full capacity, per second, drawn as a
	// reference (0: not drawn).
	Throughput float64
	// Classes names the requests' priority classes, first shed first
	// (nil: none recorded).
	Classes []string
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, max(0, int(math.Ceil(p*float64(len(s))))-1))]
}

// summarize computes the rows from runs, one of which is the
// oracle's.
func summarize(runs []*runRecord, bin, steadyAfter time.Duration) (*overloadResult, error) {
	var oracle *runRecord
	for _, r := range runs {
		if r.Name == OracleName {
			oracle = r
		}
	}
	if oracle == nil {
		return nil, fmt.Errorf("sim: overload: no %s run", OracleName)
	}
	res := &overloadResult{Runs: runs, Bin: bin, Classes: oracle.classes}
	var noLoadP50 float64
	for _, p := range oracle.phases {
		if p.Name == "0.5x" {
			lat := oracle.latencies(p, p.Start, bin)
			res.NoLoadP99, noLoadP50 = time.Duration(percentile(lat, 0.99)), percentile(lat, 0.5)
		}
	}
	if res.NoLoadP99 <= 0 {
		return nil, fmt.Errorf("sim: overload: the oracle completed nothing at 0.5x")
	}
	sum := overloadSummary{oracle: oracle, bin: bin, steadyAfter: steadyAfter, noLoad: float64(res.NoLoadP99), noLoadP50: noLoadP50, classes: len(res.Classes)}
	for _, r := range runs {
		for i, p := range r.phases {
			if p.Name != "warmup" {
				res.Rows = append(res.Rows, sum.row(r, i, p))
			}
		}
	}
	return res, nil
}

// overloadSummary is what every row of [summarize] is measured
// against.
type overloadSummary struct {
	oracle           *runRecord
	bin, steadyAfter time.Duration
	noLoad           float64 // the oracle's p99 at 0.5x, ns
	noLoadP50        float64 // and its median
	classes          int     // the oracle's priority classes
}

// row is r's row for its phase i, p.
func (s overloadSummary) row(r *runRecord, i int, p overloadPhase) OverloadRow {
	secs := (p.End - p.Start).Seconds()
	row := OverloadRow{Limiter: r.Name, Phase: p.Name, CriticalSuccess: math.NaN(), SettleS: math.NaN()}
	row.Goodput = float64(r.ph[i].good) / secs
	row.GoodputRatio = math.NaN() // the oracle completed nothing in time: no reference
	if s.oracle.ph[i].good > 0 {
		row.GoodputRatio = float64(r.ph[i].good) / float64(s.oracle.ph[i].good)
	}
	steady := r.latencies(p, p.Start+s.steadyAfter, s.bin)
	p99 := percentile(steady, 0.99)
	row.P99, row.P99Ratio = time.Duration(p99), p99/s.noLoad
	row.P50Ratio = percentile(steady, 0.5) / s.noLoadP50
	if r.ph[i].arrivals > 0 {
		row.FalseRejectRate = float64(r.ph[i].falseRejected) / float64(r.ph[i].arrivals)
		row.RejectRate = float64(r.ph[i].rejected) / float64(r.ph[i].arrivals)
	}
	if len(r.classes) > 0 && len(r.classes) == s.classes {
		row.ClassSuccess = r.classSuccess(i)
		if r.classed {
			row.CriticalSuccess = row.ClassSuccess[len(r.classes)-1]
		}
	}
	first, last := int(p.Start/s.bin), min(int(p.End/s.bin), len(r.bins))
	if settled := s.settled(r, first, last); settled < last {
		row.SettleS = (time.Duration(settled-first) * s.bin).Seconds()
	}
	row.MeanLimit = r.meanLimit(first, last)
	return row
}

// latencies are those of r's requests completed in phase p from from on,
// ns.
func (r *runRecord) latencies(p overloadPhase, from, bin time.Duration) []float64 {
	var v []float64
	for b := int(from / bin); b < int(p.End/bin) && b < len(r.bins); b++ {
		v = append(v, r.bins[b].lat...)
	}
	return v
}

// classSuccess is the share of each class's arrivals in phase i that
// succeeded (NaN for a class without arrivals).
func (r *runRecord) classSuccess(i int) []float64 {
	v := make([]float64, len(r.classes))
	for k, ct := range r.cls[i] {
		v[k] = math.NaN()
		if ct.arrivals > 0 {
			v[k] = float64(ct.good) / float64(ct.arrivals)
		}
	}
	return v
}

// settled is the bin of [first, last) from which r settled, last if it
// did not: the first bin after which every bin's p99 is within 3x the
// no-load p99 and the goodput from there to the end is at least 90% of
// the oracle's (a limiter that refuses everything has a fine p99). Bins
// are short, so their goodput alone is too noisy to judge each on its
// own.
func (s overloadSummary) settled(r *runRecord, first, last int) int {
	oracleGood := 0.0
	for b := first; b < last; b++ {
		oracleGood += float64(s.oracle.bins[b].good)
	}
	oracleGood /= float64(max(1, last-first))
	settled, good := last, 0
	for b := last - 1; b >= first; b-- {
		bb := r.bins[b]
		if len(bb.lat) == 0 || percentile(bb.lat, 0.99) > 3*s.noLoad {
			break
		}
		good += bb.good
		if float64(good) >= 0.9*oracleGood*float64(last-b) {
			settled = b
		}
	}
	return settled
}

// meanLimit is the mean of the limits sampled in bins [first, last), NaN
// if none was.
func (r *runRecord) meanLimit(first, last int) float64 {
	sum, n := 0.0, 0
	for b := first; b < last; b++ {
		if r.bins[b].sampled && r.bins[b].limit >= 0 {
			sum += float64(r.bins[b].limit)
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// orNil turns NaN into no value.
func orNil(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

// Table returns one row per contender and phase, with the fields
// limiter, phase, goodput_ratio, p99_ratio, settle_s,
// false_reject_rate, critical_success; then, when the requests had
// classes, success_<class> for each class, first shed first.
func (r *overloadResult) Table() table {
	t := table{Columns: []column{{"limiter", 0}, {"phase", 0}, {"goodput_ratio", 3}, {"p99_ratio", 2},
		{"settle_s", 2}, {"false_reject_rate", 4}, {"critical_success", 4}}}
	for _, c := range r.Classes {
		t.Columns = append(t.Columns, column{"success_" + c, 4})
	}
	for _, row := range r.Rows {
		cells := []any{row.Limiter, row.Phase, orNil(row.GoodputRatio), orNil(row.P99Ratio),
			orNil(row.SettleS), row.FalseRejectRate, orNil(row.CriticalSuccess)}
		for k := range r.Classes {
			var v any
			if k < len(row.ClassSuccess) {
				v = orNil(row.ClassSuccess[k])
			}
			cells = append(cells, v)
		}
		t.Rows = append(t.Rows, cells)
	}
	return t
}

// curve returns the time series of every run, one row per run and bin:
// limit (-1: none), requests in flight, p99 of the responses in the bin,
// and goodput, as a table (write it as CSV).
func (r *overloadResult) Series() table {
	t := table{Columns: []column{{"limiter", 0}, {"t_s", 3}, {"phase", 0}, {"limit", 0}, {"inflight", 0},
		{"p99_ms", 2}, {"goodput_rps", 1}}}
	for _, run := range r.Runs {
		for b, bb := range run.bins {
			at := time.Duration(b+1) * r.Bin
			ph := ""
			if i := phaseAt(run.phases, at-1); i >= 0 {
				ph = run.phases[i].Name
			}
			p99 := orNil(percentile(bb.lat, 0.99) / 1e6)
			t.Rows = append(t.Rows, []any{run.Name, at.Seconds(), ph, bb.limit, bb.inflight, p99,
				float64(bb.good) / r.Bin.Seconds()})
		}
	}
	return t
}

// figure plots, for every contender over time, the limit, the requests in
// flight, the p99 latency (log scale) and the goodput.
func (r *overloadResult) Figure() figure {
	plots := []chart{
		{Title: "concurrency limit", XLabel: "time (s)", YLabel: "limit"},
		{Title: "requests in flight at the server", XLabel: "time (s)", YLabel: "in flight", LogY: true},
		{Title: "p99 latency of the responses in each bin", XLabel: "time (s)", YLabel: "p99 (ms)", LogY: true},
		{Title: "goodput (responses within the deadline)", XLabel: "time (s)", YLabel: "per second"},
	}
	for _, run := range r.Runs {
		var x, lim, inf, p99, good []float64
		var px []float64
		for b, bb := range run.bins {
			at := (time.Duration(b+1) * r.Bin).Seconds()
			x = append(x, at)
			lim = append(lim, float64(bb.limit))
			inf = append(inf, float64(bb.inflight))
			good = append(good, float64(bb.good)/r.Bin.Seconds())
			if v := percentile(bb.lat, 0.99); !math.IsNaN(v) {
				px = append(px, at)
				p99 = append(p99, v/1e6)
			}
		}
		// The shedders, dashed, in the colours the palette gives the
		// limiters before them (it has 7).
		dashed := run.classed
		if slices.ContainsFunc(lim, func(v float64) bool { return v >= 0 }) { // none, the utilization shedder: no limit
			plots[0].Series = append(plots[0].Series, curve{Name: run.Name, X: x, Y: lim, Step: true, Dashed: dashed})
		}
		plots[1].Series = append(plots[1].Series, curve{Name: run.Name, X: x, Y: inf, Dashed: dashed})
		plots[2].Series = append(plots[2].Series, curve{Name: run.Name, X: px, Y: p99, Dashed: dashed})
		plots[3].Series = append(plots[3].Series, curve{Name: run.Name, X: x, Y: good, Dashed: dashed})
	}
	if len(r.Runs) > 0 && r.Throughput > 0 {
		var x, y []float64
		for _, p := range r.Runs[0].phases {
			x = append(x, p.Start.Seconds())
			y = append(y, r.Throughput*p.Capacity)
		}
		last := r.Runs[0].phases[len(r.Runs[0].phases)-1]
		x, y = append(x, last.End.Seconds()), append(y, r.Throughput*last.Capacity)
		plots[3].Series = append(plots[3].Series, curve{Name: "server capacity", X: x, Y: y, Step: true, Dashed: true, Color: "#000000"})
	}
	title := fmt.Sprintf("sluice sim overload: 0.5x, 2x, 5x, capacity halved, restored (no-load p99 %v)",
		r.NoLoadP99.Round(100*time.Microsecond))
	return figure{Title: title, Plots: plots}
}
