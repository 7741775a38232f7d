package sim

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

func TestEventOrder(t *testing.T) {
	t.Parallel()
	s := newEngine(1, 0)
	var got []string
	at := func(d time.Duration, name string) { s.At(d, func() { got = append(got, name) }) }
	at(30*time.Millisecond, "c")
	at(10*time.Millisecond, "a1")
	at(10*time.Millisecond, "a2") // same time: after a1
	at(20*time.Millisecond, "b")
	s.At(10*time.Millisecond, func() {
		got = append(got, "a3")
		s.At(0, func() { got = append(got, "past") }) // in the past: runs now, after what is due
	})
	s.RunUntil(20 * time.Millisecond)
	if want := "a1 a2 a3 past b"; strings.Join(got, " ") != want {
		t.Errorf("RunUntil(20ms) ran %q, want %q", strings.Join(got, " "), want)
	}
	if s.Now() != 20*time.Millisecond || s.Pending() != 1 {
		t.Errorf("after RunUntil(20ms): Now() = %v, Pending() = %d, want 20ms, 1", s.Now(), s.Pending())
	}
	if end := s.Run(); end != 30*time.Millisecond {
		t.Errorf("Run() = %v, want 30ms", end)
	}
	if !s.Time().Equal(epoch.Add(30 * time.Millisecond)) {
		t.Errorf("Time() = %v, want epoch+30ms", s.Time())
	}
}

func TestQueueHeap(t *testing.T) {
	t.Parallel()
	s := newEngine(7, 7)
	r := rand.New(rand.NewPCG(1, 1))
	var got []time.Duration
	for range 2000 {
		d := time.Duration(r.IntN(500))
		s.At(d, func() { got = append(got, s.Now()) })
	}
	s.Run()
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Fatalf("event %d ran at %v after one at %v", i, got[i], got[i-1])
		}
	}
	if len(got) != 2000 {
		t.Errorf("ran %d events, want 2000", len(got))
	}
}

// scenarios runs every scenario, small, with seed.
func scenarios(t *testing.T, seed uint64) map[string]interface {
	Table() table
	Figure() figure
} {
	t.Helper()
	out := map[string]interface {
		Table() table
		Figure() figure
	}{}
	b, err := run(brooker, brookerOptions{Seed: seed, Runs: 3, Clients: []int{10, 40}})
	must(t, err)
	out["brooker"] = b
	o, err := run(objectStore, objectStoreOptions{Seed: seed, Runs: 5})
	must(t, err)
	out["objectstore"] = o
	a, err := run(aimd, aimdOptions{Seed: seed, Phases: []aimdPhase{{0, 30}, {20 * time.Second, 60}}, Duration: 40 * time.Second})
	must(t, err)
	out["aimd"] = a
	k, err := run(buckets, bucketsOptions{Seed: seed})
	must(t, err)
	out["buckets"] = k
	w, err := run(windows, windowsOptions{Seed: seed, Sources: 10, Duration: 5 * time.Minute})
	must(t, err)
	out["windows"] = w
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func render(t *testing.T, r interface {
	Table() table
	Figure() figure
}) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, f := range formats {
		must(t, r.Table().Write(&b, f))
	}
	must(t, r.Figure().WriteSVG(&b))
	return b.Bytes()
}

// TestSameSeedSameBytes checks that every scenario prints the same bytes
// (table in every format, and SVG) for the same seed, and different ones
// for another seed.
func TestSameSeedSameBytes(t *testing.T) {
	t.Parallel()
	a, b, c := scenarios(t, 42), scenarios(t, 42), scenarios(t, 43)
	for name := range a {
		ra, rb, rc := render(t, a[name]), render(t, b[name]), render(t, c[name])
		if !bytes.Equal(ra, rb) {
			t.Errorf("%s: two runs with seed 42 printed different output", name)
		}
		if bytes.Equal(ra, rc) {
			t.Errorf("%s: seeds 42 and 43 printed the same output", name)
		}
	}
}

func TestBrookerFinding(t *testing.T) {
	t.Parallel()
	r, err := run(brooker, brookerOptions{Seed: 1, Runs: 10, Clients: []int{100}})
	must(t, err)
	row := func(s string) brookerRow {
		x, ok := r.Row(s, 100)
		if !ok {
			t.Fatalf("no row for %s at 100 clients", s)
		}
		return x
	}
	exp, full := row("exponential"), row("full-jitter")
	if full.MeanCalls >= exp.MeanCalls/2 {
		t.Errorf("at 100 clients full-jitter makes %.1f calls, exponential %.1f: want less than half",
			full.MeanCalls, exp.MeanCalls)
	}
	none := row("no-backoff")
	for _, s := range []string{"full-jitter", "equal-jitter", "decorrelated-jitter"} {
		j := row(s)
		if j.MeanCalls >= exp.MeanCalls {
			t.Errorf("%s makes %.1f calls, exponential %.1f: want fewer", s, j.MeanCalls, exp.MeanCalls)
		}
		if j.MeanTime >= exp.MeanTime {
			t.Errorf("%s takes %v, exponential %v: want less", s, j.MeanTime, exp.MeanTime)
		}
	}
	if none.MeanCalls <= exp.MeanCalls {
		t.Errorf("no-backoff makes %.1f calls, exponential %.1f: want more", none.MeanCalls, exp.MeanCalls)
	}
	if none.MeanTime >= full.MeanTime {
		t.Errorf("no-backoff takes %v, full-jitter %v: want less (it never waits)", none.MeanTime, full.MeanTime)
	}
	if dec, eq := row("decorrelated-jitter"), row("equal-jitter"); dec.MeanTime >= eq.MeanTime {
		t.Errorf("decorrelated-jitter takes %v, equal-jitter %v: want less", dec.MeanTime, eq.MeanTime)
	}
	for _, x := range r.Rows {
		if x.MeanCalls < 100 {
			t.Errorf("%s: %.1f calls for 100 clients: every client writes at least once", x.Strategy, x.MeanCalls)
		}
	}
}

func TestBrookerOneClient(t *testing.T) {
	t.Parallel()
	r, err := run(brooker, brookerOptions{Seed: 3, Runs: 5, Clients: []int{1}})
	must(t, err)
	for _, x := range r.Rows {
		// Alone, a client writes once: four legs of about 10 ms.
		if x.MeanCalls != 1 || x.MeanTime < 20*time.Millisecond || x.MeanTime > 60*time.Millisecond {
			t.Errorf("%s with one client: %.1f calls in %v, want 1 call in about 40ms", x.Strategy, x.MeanCalls, x.MeanTime)
		}
	}
}

func TestBrookerBadOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []brookerOptions{{Strategies: []string{"linear"}}, {Clients: []int{0}}} {
		if _, err := run(brooker, o); err == nil {
			t.Errorf("Brooker(%+v) = nil error, want one", o)
		}
	}
}

func TestObjectStoreExample(t *testing.T) {
	t.Parallel()
	const runs = 200
	r, err := run(objectStore, objectStoreOptions{Seed: 1, Runs: runs})
	must(t, err)
	bo, now := r.Rows[0], r.Rows[1]
	if bo.Strategy != "backoff" || now.Strategy != "retry-immediately" {
		t.Fatalf("rows %q, %q, want backoff, retry-immediately", bo.Strategy, now.Strategy)
	}
	if bo.Requests != 9*runs || bo.Succeeded != 9*runs || bo.Dropped != 0 {
		t.Errorf("backoff: %d of %d landed, %d dropped, want all, none dropped", bo.Succeeded, bo.Requests, bo.Dropped)
	}
	if bo.Elapsed >= time.Second {
		t.Errorf("backoff: slowest run took %v, want under a second", bo.Elapsed)
	}
	// 5 land at once, 4 are throttled once and land on their first retry.
	if bo.Calls != 13*runs || bo.Throttled != 4*runs {
		t.Errorf("backoff: %d calls, %d 429s, want %d and %d", bo.Calls, bo.Throttled, 13*runs, 4*runs)
	}
	if now.Calls <= 2*bo.Calls || now.Throttled <= 4*bo.Throttled {
		t.Errorf("retry-immediately: %d calls, %d 429s; backoff %d, %d: want more than twice the calls, four times the 429s",
			now.Calls, now.Throttled, bo.Calls, bo.Throttled)
	}
	if now.Succeeded+now.Dropped != now.Requests {
		t.Errorf("retry-immediately: %d landed + %d dropped != %d", now.Succeeded, now.Dropped, now.Requests)
	}
}

func TestAIMDSawtooth(t *testing.T) {
	t.Parallel()
	r, err := run(aimd, aimdOptions{Seed: 1})
	must(t, err)
	for i, row := range r.Rows[:len(r.Rows)-1] {
		if row.Sent > 1.05*float64(row.Limit) {
			t.Errorf("phase %d: sent %.1f/s against a limit of %d/s: want at most 5%% over", row.Phase, row.Sent, row.Limit)
		}
		switch {
		case i == 0 || row.Limit < r.Rows[i-1].Limit:
			// Found from above (slow start, a fall): it hugs the limit.
			if row.Goodput < 0.8*float64(row.Limit) {
				t.Errorf("phase %d: goodput %.1f/s against a limit of %d/s: want at least 80%%", row.Phase, row.Goodput, row.Limit)
			}
		default:
			// The limit rose: the client climbs towards it.
			if prev := r.Rows[i-1]; row.Goodput <= prev.Goodput {
				t.Errorf("phase %d: goodput %.1f/s after %.1f/s, though the limit rose from %d to %d/s",
					row.Phase, row.Goodput, prev.Goodput, prev.Limit, row.Limit)
			}
		}
	}
	if all := r.Rows[len(r.Rows)-1]; all.Throttled <= 0 || all.Throttled > 0.02 {
		t.Errorf("429 fraction over the run = %.4f, want some, under 2%%", all.Throttled)
	}
	// The sawtooth: in the first phase, after slow start, the rate is cut
	// several times and climbs back each time.
	cuts := 0
	for i := 1; i < len(r.Rate) && r.RateAt[i] < 60; i++ {
		if r.RateAt[i] > 10 && r.Rate[i] < r.Rate[i-1] {
			cuts++
		}
	}
	if cuts < 3 {
		t.Errorf("%d rate cuts in the first minute, want a sawtooth (3 or more)", cuts)
	}
}

func TestBucketsShapes(t *testing.T) {
	t.Parallel()
	r, err := run(buckets, bucketsOptions{Seed: 1})
	must(t, err)
	o := r.Options
	tb, lb := r.Row(ratelimit.TokenBucket), r.Row(ratelimit.LeakyBucket)
	fw, sw := r.Row(ratelimit.FixedWindow), r.Row(ratelimit.SlidingWindowCounter)
	if tb.Admitted != lb.Admitted {
		t.Errorf("token bucket admitted %d, leaky queue %d: want the same (the queue admits what GCRA admits)", tb.Admitted, lb.Admitted)
	}
	if tb.Delayed != 0 || fw.Delayed != 0 || sw.Delayed != 0 || lb.Delayed == 0 {
		t.Errorf("delayed: token %d, leaky %d, fixed %d, sliding %d: want only the leaky queue to delay",
			tb.Delayed, lb.Delayed, fw.Delayed, sw.Delayed)
	}
	if lb.MaxDelay > time.Duration(o.Burst)*time.Second/time.Duration(o.Rate) {
		t.Errorf("leaky queue max delay %v, want at most a full queue (%d slots)", lb.MaxDelay, o.Burst)
	}
	if lb.Peak1s > int(o.Rate) {
		t.Errorf("leaky queue let %d through in one second, want at most the rate %d", lb.Peak1s, o.Rate)
	}
	if tb.Peak1s <= int(o.Rate) || tb.Peak1s > int(o.Rate+o.Burst) {
		t.Errorf("token bucket let %d through in one second, want a burst: more than %d, at most %d", tb.Peak1s, o.Rate, o.Rate+o.Burst)
	}
	if fw.Peak1s < int(o.Rate)*3/2 || fw.Peak1s > 2*int(o.Rate) {
		t.Errorf("fixed window let %d through in one second, want the boundary burst: %d to %d", fw.Peak1s, o.Rate*3/2, 2*o.Rate)
	}
	if sw.Peak1s >= fw.Peak1s {
		t.Errorf("sliding counter let %d through in one second, fixed window %d: want fewer", sw.Peak1s, fw.Peak1s)
	}
	for _, row := range r.Rows {
		if row.Admitted+row.Rejected != row.Arrivals {
			t.Errorf("%v: %d admitted + %d rejected != %d arrivals", row.Algorithm, row.Admitted, row.Rejected, row.Arrivals)
		}
	}
}

func TestWindowsAccuracy(t *testing.T) {
	t.Parallel()
	r, err := run(windows, windowsOptions{Seed: 1, Sources: 40, Duration: 15 * time.Minute})
	must(t, err)
	all := r.All()
	if all.Requests == 0 {
		t.Fatal("no requests")
	}
	if w := all.Wrong(); w <= 0 || w > 0.03 {
		t.Errorf("wrong decisions = %.4f%%, want some, under 3%%", 100*w)
	}
	if all.Gap <= 0 || all.Gap > 0.10 {
		t.Errorf("mean gap = %.2f%%, want under 10%%", 100*all.Gap)
	}
	// Far from the limit the counter never decides differently; the
	// mistakes are near it.
	first, last := r.Rows[0], r.Rows[len(r.Rows)-2]
	if first.Wrong() != 0 || last.Wrong() > 0.001 {
		t.Errorf("wrong far from the limit: load %s %.4f%%, load %s %.4f%%, want (about) none",
			first.Class, 100*first.Wrong(), last.Class, 100*last.Wrong())
	}
	// As limiters on their own histories, the two admit about as much; the
	// counter can exceed the limit in some real window, by a bounded amount.
	if d := math.Abs(float64(all.CounterAdmitted-all.LogAdmitted)) / float64(all.LogAdmitted); d > 0.02 {
		t.Errorf("counter admitted %d, log %d: want within 2%%", all.CounterAdmitted, all.LogAdmitted)
	}
	if lim := int(r.Options.Limit.Rate); all.CounterPeak <= lim || all.CounterPeak > lim*3/2 {
		t.Errorf("counter's most in one window = %d, want over the limit %d (it assumes an even spread) but under %d",
			all.CounterPeak, lim, lim*3/2)
	}
	near := r.Rows[2] // 0.8-1
	if near.Requests > 0 && near.Wrong() <= all.Wrong() {
		t.Errorf("wrong near the limit (%s) = %.4f%%, overall %.4f%%: want more near it", near.Class, 100*near.Wrong(), 100*all.Wrong())
	}
}

// TestSlidingEstimate checks the estimate the windows scenario reads from a
// window.State against the decisions window.Sliding makes on it: the
// counter admits n exactly when estimate + n <= rate.
func TestSlidingEstimate(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 5))
	lim := ratelimit.Limit{Rate: 50, Period: time.Minute}
	w := int64(lim.Period)
	base := epoch.UnixNano() / w * w
	for i := range 20000 {
		s := window.State{Start: base, Prev: r.Int64N(60), Curr: r.Int64N(60)}
		now := base + r.Int64N(3*w)
		n := 1 + r.Int64N(5)
		_, d := window.Sliding(s, now, ratelimit.Request{Limit: lim, Algorithm: ratelimit.SlidingWindowCounter, N: n})
		est := slidingEstimate(s, now, lim.Period)
		if want := est+float64(n) <= float64(lim.Rate); d.Allowed != want {
			t.Fatalf("case %d: %+v at +%v, n=%d: Sliding allowed %v, estimate %.3f says %v",
				i, s, time.Duration(now-base), n, d.Allowed, est, want)
		}
	}
	if est := slidingEstimate(window.State{}, base, lim.Period); est != 0 {
		t.Errorf("estimate of an empty state = %v, want 0", est)
	}
}

func TestTableFormats(t *testing.T) {
	t.Parallel()
	r, err := run(objectStore, objectStoreOptions{Seed: 1})
	must(t, err)
	tab := r.Table()
	var j bytes.Buffer
	must(t, tab.Write(&j, "json"))
	var rows []map[string]any
	if err := json.Unmarshal(j.Bytes(), &rows); err != nil {
		t.Fatalf("json output does not parse: %v\n%s", err, j.String())
	}
	for _, k := range []string{"strategy", "requests", "succeeded", "dropped", "elapsed_ms"} {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("json row %v has no %q", rows[0], k)
		}
	}
	var c bytes.Buffer
	must(t, tab.Write(&c, "csv"))
	recs, err := csv.NewReader(&c).ReadAll()
	if err != nil || len(recs) != 1+len(tab.Rows) || recs[0][0] != "strategy" {
		t.Errorf("csv output = %q, %v, want a header and %d rows", recs, err, len(tab.Rows))
	}
	var x bytes.Buffer
	must(t, tab.Write(&x, "table"))
	if lines := strings.Split(strings.TrimSpace(x.String()), "\n"); len(lines) != 1+len(tab.Rows) || !strings.Contains(lines[0], "elapsed_ms") {
		t.Errorf("table output:\n%s\nwant a header and %d rows", x.String(), len(tab.Rows))
	}
	if err := tab.Write(io.Discard, "yaml"); !errors.Is(err, ErrFormat) {
		t.Errorf(`Write(w, "yaml") = %v, want ErrFormat`, err)
	}
	var empty bytes.Buffer
	must(t, table{Columns: tab.Columns}.Write(&empty, "json"))
	if empty.String() != "[]\n" {
		t.Errorf("empty table as json = %q, want %q", empty.String(), "[]\n")
	}
}

// TestSVGWellFormed parses every scenario's figure as XML.
func TestSVGWellFormed(t *testing.T) {
	t.Parallel()
	for name, r := range scenarios(t, 1) {
		var b bytes.Buffer
		f := r.Figure()
		f.Title += ` <&> "quoted"`
		must(t, f.WriteSVG(&b))
		d := xml.NewDecoder(&b)
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("%s: SVG is not well-formed XML: %v", name, err)
				break
			}
		}
	}
	// Degenerate plots draw too.
	var b bytes.Buffer
	must(t, figure{Plots: []chart{{}, {Series: []curve{{Name: "one", X: []float64{1}, Y: []float64{1}}}}}}.WriteSVG(&b))
	if !strings.HasSuffix(b.String(), "</svg>\n") {
		t.Errorf("degenerate figure: %q", b.String())
	}
}

func TestTicks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		lo, hi float64
		want   string
	}{
		{0, 10, "0 2 4 6 8 10"},
		{0, 1, "0.0 0.2 0.4 0.6 0.8 1.0"},
		{0, 8004.9, "0 2000 4000 6000 8000 10000"},
		{10, 190, "0 50 100 150 200"},
	}
	for _, tt := range tests {
		ts := ticks(tt.lo, tt.hi, 5)
		var got []string
		for _, v := range ts {
			got = append(got, tickLabel(v, ts))
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("ticks(%v, %v) = %s, want %s", tt.lo, tt.hi, g, tt.want)
		}
	}
}
