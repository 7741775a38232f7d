package status_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/server/status"
)

func TestLabel(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"sl:token_bucket:60000ms:sluice_remote%5Faddress_127.0.0.1_", "remote_address=127.0.0.1"},
		{"sl:fixed_window:1000ms:api_user_alice_path_%2Fv1%5Fx_", "user=alice, path=%2Fv1_x"},
		{"sl:quota:2026-11:api_user_a%25b_", "user=a%b"},
		{"sl:gcra:1000ms:d%5Fom_k_v_", "k=v"},
		{"other", "other"},
		{"sl:gcra:1000ms:dom_k_", "sl:gcra:1000ms:dom_k_"},
		{"sl:gcra", "sl:gcra"},
	} {
		if got := status.Label(c.key); got != c.want {
			t.Errorf("Label(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}

func fixedClock(t0 time.Time) (func() time.Time, func(time.Duration)) {
	now := t0
	return func() time.Time { return now }, func(d time.Duration) { now = now.Add(d) }
}

func TestRecorderMinutesAndTop(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 30, 0, time.UTC)
	now, advance := fixedClock(t0)
	rec := status.NewRecorder(status.Options{Minutes: 3, Now: now})
	rec.SetRules([]status.RuleInfo{{ID: "per-ip", Name: "per-ip", Limit: "5/1m0s"}, {ID: "sh", Name: "sh", Shadow: true}})
	ip := rec.Rule("per-ip")
	for range 4 {
		ip.Record(status.Allowed, "")
	}
	for range 6 {
		ip.Record(status.Denied, "sl:gcra:60000ms:d_remote%5Faddress_10.0.0.1_")
	}
	ip.Record(status.Denied, "sl:gcra:60000ms:d_remote%5Faddress_10.0.0.2_")
	advance(time.Minute)
	ip.Record(status.Denied, "sl:gcra:60000ms:d_remote%5Faddress_10.0.0.2_")
	rec.Rule("sh").Record(status.ShadowDenied, "sl:gcra:60000ms:d_user_bob_")
	srv := &status.Server{Name: "gateway", Recorder: rec}
	p := srv.Page(context.Background(), "")
	if len(p.Rules) != 2 {
		t.Fatalf("got %d rules, want 2", len(p.Rules))
	}
	r := p.Rules[0]
	if r.Allowed != 4 || r.Denied != 8 || len(r.Minutes) != 3 {
		t.Errorf("got allowed %d denied %d minutes %d, want 4 8 3", r.Allowed, r.Denied, len(r.Minutes))
	}
	if r.Minutes[1].Denied != 7 || r.Minutes[2].Denied != 1 || r.Minutes[0].Denied != 0 {
		t.Errorf("got minutes %+v, want 0, 7, 1 denied", r.Minutes)
	}
	if len(r.TopDenied) != 2 || r.TopDenied[0].Who != "remote_address=10.0.0.1" || r.TopDenied[0].Count != 6 {
		t.Errorf("got top %+v, want 10.0.0.1 first with 6", r.TopDenied)
	}
	if want := 8.0 / 12; r.DenialRate != want {
		t.Errorf("got denial rate %v, want %v", r.DenialRate, want)
	}
	if s := p.Rules[1]; s.EnforcePercent != 0 || len(s.TopShadowDenied) != 1 || s.TopShadowDenied[0].Who != "user=bob" {
		t.Errorf("got shadow rule %+v, want bob would have been blocked", s)
	}
	// Three minutes later the ring has rolled over.
	advance(3 * time.Minute)
	if p := srv.Page(context.Background(), ""); p.Rules[0].Denied != 0 {
		t.Errorf("got %d denied after the ring rolled over, want 0", p.Rules[0].Denied)
	}
	// A reload keeps a rule's counters and drops removed rules.
	rec.SetRules([]status.RuleInfo{{ID: "per-ip", Name: "per-ip", Limit: "10/1m0s"}})
	if got := rec.Rules(); len(got) != 1 || got[0].Info().Limit != "10/1m0s" || got[0] != ip {
		t.Errorf("got rules %v after reload, want per-ip kept with its new limit", got)
	}
}

func TestHandler(t *testing.T) {
	rec := status.NewRecorder(status.Options{})
	rec.SetRules([]status.RuleInfo{{ID: "per-ip", Name: "per-ip", Limit: "5/1m0s", Algorithm: "token_bucket"}})
	for range 3 {
		rec.Rule("per-ip").Record(status.Denied, "sl:token_bucket:60000ms:sluice_remote%5Faddress_<script>_")
	}
	srv := &status.Server{Name: "gateway", Recorder: rec,
		Store: func() status.StoreInfo {
			return status.StoreInfo{URL: "memory", OK: true, Detail: "3 keys", FailurePolicy: "allow"}
		},
		Lookup: func(_ context.Context, id string) ([]status.Peek, error) {
			if id == "bad" {
				return nil, errors.New("not an identity")
			}
			return []status.Peek{{Rule: "per-ip", Key: "k", Limit: "5/1m0s", Quota: 5, Remaining: 2}}, nil
		},
	}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	get := func(path string) (string, *http.Response) {
		res, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b), res
	}
	body, res := get("/status?identity=ip:10.0.0.1")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("got %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	for _, want := range []string{"remote_address=&lt;script&gt;", "<svg", `http-equiv="refresh"`, "2 / 5", "on store error: <b>allow</b>"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>") {
		t.Error("page has an unescaped <script>")
	}
	body, _ = get("/status.json?identity=bad")
	var p status.Page
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatal(err)
	}
	if p.Lookup == nil || p.Lookup.Error != "not an identity" || len(p.Rules) != 1 || p.Rules[0].TopDenied[0].Count != 3 {
		t.Errorf("got %+v", p)
	}
}

func BenchmarkRecordDenied(b *testing.B) {
	rec := status.NewRecorder(status.Options{})
	rec.SetRules([]status.RuleInfo{{ID: "r", Name: "r"}})
	rl := rec.Rule("r")
	key := "sl:token_bucket:60000ms:sluice_remote%5Faddress_203.0.113.7_"
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rl.Record(status.Denied, key)
		}
	})
}

func BenchmarkRecordAllowed(b *testing.B) {
	rec := status.NewRecorder(status.Options{})
	rec.SetRules([]status.RuleInfo{{ID: "r", Name: "r"}})
	rl := rec.Rule("r")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rl.Record(status.Allowed, "")
		}
	})
}

// TestEnforcedColumnFollowsTheAdminAPI: a shadow rule the admin API
// enforces on 10% or 100% of identities shows that percentage in the
// page's Enforced column, as /status.json's enforce_percent does (the page
// said "shadow" whatever the percentage).
func TestEnforcedColumnFollowsTheAdminAPI(t *testing.T) {
	rec := status.NewRecorder(status.Options{})
	rec.SetRules([]status.RuleInfo{
		{ID: "ten", Name: "ten", Shadow: true},
		{ID: "all", Name: "all", Shadow: true},
		{ID: "dark", Name: "dark", Shadow: true},
		{ID: "plain", Name: "plain"},
		{ID: "half", Name: "half"},
	})
	percent := map[string]float64{"ten": 10, "all": 100, "dark": 0, "plain": 100, "half": 50}
	srv := &status.Server{Name: "gateway", Recorder: rec, Enforce: func(id string) float64 { return percent[id] }}
	mux := http.NewServeMux()
	srv.Register(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	res, err := http.Get(ts.URL + "/status")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	cells := enforcedCells(string(b))
	want := map[string]string{"ten": "10%", "all": "100%", "dark": "shadow", "plain": "100%", "half": "50%"}
	for name, w := range want {
		if got := cells[name]; got != w {
			t.Errorf("rule %s: got Enforced %q, want %q", name, got, w)
		}
	}
}

// enforcedCells reads the rules table: rule name -> its Enforced cell's
// text.
func enforcedCells(page string) map[string]string {
	out := map[string]string{}
	for _, row := range strings.Split(page, "<tr>")[1:] {
		_, rest, ok := strings.Cut(row, `<a href="#rule-`)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, `"`)
		tds := strings.Split(row, "<td")
		if len(tds) < 5 { // Rule, Limit, Algorithm, Enforced, ...
			continue
		}
		_, cell, _ := strings.Cut(tds[4], ">")
		cell, _, _ = strings.Cut(cell, "</td>")
		for strings.Contains(cell, "<") { // drop tags
			i := strings.IndexByte(cell, '<')
			j := strings.IndexByte(cell[i:], '>')
			if j < 0 {
				break
			}
			cell = cell[:i] + cell[i+j+1:]
		}
		out[name] = strings.TrimSpace(cell)
	}
	return out
}
