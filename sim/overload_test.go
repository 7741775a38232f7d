package sim

import (
	"bytes"
	"math"
	"testing"
	"time"
)

// smallOverload is a bounded run: 2 s phases, a 1 s warm-up, 20 requests
// in flight of capacity.
func smallOverload(seed uint64) overloadOptions {
	return overloadOptions{RealTimeOptions: RealTimeOptions{Seed: seed, Model: IOModel{Capacity: 20, Base: 20 * time.Millisecond},
		Warmup: time.Second, Phase: 2 * time.Second}, SteadyAfter: 500 * time.Millisecond}
}

func TestOverloadDeterministic(t *testing.T) {
	out := func(seed uint64) string {
		res, err := run(overload, smallOverload(seed))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := res.Table().Write(&b, "json"); err != nil {
			t.Fatal(err)
		}
		if err := res.Series().Write(&b, "csv"); err != nil {
			t.Fatal(err)
		}
		if err := res.Figure().WriteSVG(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	a, b := out(3), out(3)
	if a != b {
		t.Fatal("the same seed printed different bytes")
	}
	if a == out(4) {
		t.Fatal("seeds 3 and 4 printed the same bytes")
	}
}

func TestOverloadRows(t *testing.T) {
	res, err := run(overload, smallOverload(1))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]OverloadRow{}
	for _, r := range res.Rows {
		rows[r.Limiter+"/"+r.Phase] = r
	}
	if len(res.Rows) != 4*5 {
		t.Fatalf("%d rows, want 20 (4 contenders, 5 phases)", len(res.Rows))
	}
	// The oracle is the reference: ratio 1 in every phase, nothing false
	// refused (it refuses only at capacity).
	for _, ph := range []string{"0.5x", "2x", "5x", "halved", "restored"} {
		o := rows[OracleName+"/"+ph]
		if o.GoodputRatio != 1 || o.FalseRejectRate != 0 {
			t.Errorf("oracle at %s: goodput ratio %v, false rejects %v; want 1, 0", ph, o.GoodputRatio, o.FalseRejectRate)
		}
	}
	// No limit at all collapses at 5x: the deadline is missed.
	if n := rows["none/5x"]; n.GoodputRatio > 0.5 || n.P99Ratio < 10 {
		t.Errorf("none at 5x: goodput ratio %.3f, p99 ratio %.1f: want a collapse", n.GoodputRatio, n.P99Ratio)
	}
	for _, name := range []string{"sluice-gradient", "sluice-vegas"} {
		for _, ph := range []string{"2x", "5x"} {
			r := rows[name+"/"+ph]
			if r.GoodputRatio < 0.9 || r.P99Ratio > 3 || math.IsNaN(r.P99Ratio) {
				t.Errorf("%s at %s: goodput ratio %.3f, p99 ratio %.2f", name, ph, r.GoodputRatio, r.P99Ratio)
			}
		}
		if r := rows[name+"/0.5x"]; r.FalseRejectRate != 0 {
			t.Errorf("%s at 0.5x: false reject rate %v", name, r.FalseRejectRate)
		}
		if !math.IsNaN(rows[name+"/2x"].CriticalSuccess) {
			t.Errorf("%s: critical_success set for a limiter without priorities", name)
		}
	}
}

func TestOverloadOptions(t *testing.T) {
	for _, o := range []overloadOptions{
		{RealTimeOptions: RealTimeOptions{Phase: time.Second, Bin: 2 * time.Second}},
		{RealTimeOptions: RealTimeOptions{Phase: time.Second}, SteadyAfter: time.Second},
		{RealTimeOptions: RealTimeOptions{Phase: -time.Second}},
		{RealTimeOptions: RealTimeOptions{Contenders: OverloadContenders()[:2]}},
	} {
		if _, err := run(overload, o); err == nil {
			t.Errorf("Overload(%+v): no error", o)
		}
	}
}

// TestOverloadJSONNull: a value that does not apply is null in JSON and
// "-" in the table.
func TestOverloadJSONNull(t *testing.T) {
	tb := table{Columns: []column{{"a", 0}, {"b", 2}}, Rows: [][]any{{"x", nil}, {"y", 1.5}}}
	var j, txt bytes.Buffer
	tb.Write(&j, "json")
	tb.Write(&txt, "table")
	if want := "[\n  {\"a\": \"x\", \"b\": null},\n  {\"a\": \"y\", \"b\": 1.50}\n]\n"; j.String() != want {
		t.Errorf("json %q, want %q", j.String(), want)
	}
	if !bytes.Contains(txt.Bytes(), []byte("-")) {
		t.Errorf("table %q: want - for no value", txt.String())
	}
}
