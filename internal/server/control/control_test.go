package control_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

func TestWho(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"sl:token_bucket:60000ms:sluice_user_alice_", "sluice_user_alice_"},
		{"sl:quota:2026-11:api_user_bob_", "api_user_bob_"},
		{"plain", "plain"},
	} {
		if got := control.Who(c.key); got != c.want {
			t.Errorf("Who(%q) = %q, want %q", c.key, got, c.want)
		}
	}
}

func TestEnforcedSplit(t *testing.T) {
	for _, pct := range []float64{0, 10, 50, 100} {
		n := 0
		for i := range 10000 {
			if control.Enforced("per-ip", "sluice_remote%5Faddress_10.0."+strconv.Itoa(i)+"_", pct) {
				n++
			}
		}
		// The hash spreads identities evenly: within 2 points of pct.
		if got := float64(n) / 100; got < pct-2 || got > pct+2 {
			t.Errorf("%v%%: got %v%% of 10000 identities enforced", pct, got)
		}
	}
	if control.Enforced("r", "x", 37) != control.Enforced("r", "x", 37) {
		t.Error("not stable")
	}
}

func TestOverrideExpiresAndAdjust(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	c := control.New(ctx, control.Options{Now: func() time.Time { return now }})
	defer c.Close()
	key := "sl:gcra:60000ms:d_user_alice_"
	lim, shadow := ratelimit.PerMinute(5), false
	if c.Adjust("per-user", key, &lim, &shadow) || lim != ratelimit.PerMinute(5) {
		t.Fatal("adjusted with nothing set")
	}
	if err := c.SetOverride(ctx, control.Override{Rule: "per-user", Who: control.Who(key), Limit: ratelimit.PerMinute(100), Until: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if !c.Adjust("per-user", key, &lim, &shadow) || lim != ratelimit.PerMinute(100) {
		t.Errorf("got %v, want the override", lim)
	}
	other := ratelimit.PerMinute(5)
	if c.Adjust("per-ip", key, &other, &shadow) || c.Adjust("per-user", "sl:gcra:60000ms:d_user_bob_", &other, &shadow) {
		t.Error("override applied to another rule or identity")
	}
	if n := testing.AllocsPerRun(100, func() { l := lim; s := false; c.Adjust("per-user", key, &l, &s) }); n != 0 {
		t.Errorf("Adjust allocates %v", n)
	}
	now = now.Add(time.Minute)
	lim = ratelimit.PerMinute(5)
	if c.Adjust("per-user", key, &lim, &shadow) || len(c.Overrides()) != 0 {
		t.Errorf("override in force after its expiry: %v", c.Overrides())
	}
	if err := c.SetEnforce(ctx, "per-user", 0); err != nil {
		t.Fatal(err)
	}
	c.Adjust("per-user", key, &lim, &shadow)
	if !shadow {
		t.Error("0% enforcement did not shadow")
	}
	if err := c.SetEnforce(ctx, "per-user", 101); err == nil {
		t.Error("101% accepted")
	}
}

// Two processes on one Redis: what one sets, the other reads at its next
// sync; expiry holds for both.
func TestShared(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Shared(t)
	open := func() *redisstore.Store {
		s, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Prefix: "control-test:", RequireAtStart: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	now := time.Now()
	clock := func() time.Time { return now }
	a := control.New(ctx, control.Options{Settings: open(), Poll: time.Hour, Now: clock})
	defer a.Close()
	b := control.New(ctx, control.Options{Settings: open(), Poll: time.Hour, Now: clock})
	defer b.Close()
	if err := a.SetOverride(ctx, control.Override{Rule: "r", Who: "d_user_x_", Limit: ratelimit.PerHour(9), Until: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetEnforce(ctx, "r", 10); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if o, ok := b.Override("r", "d_user_x_"); !ok || o.Limit != ratelimit.PerHour(9) {
		t.Errorf("b got override %+v %v", o, ok)
	}
	if p, ok := b.Percent("r"); !ok || p != 10 {
		t.Errorf("b got percent %v %v", p, ok)
	}
	now = now.Add(time.Minute)
	if _, ok := b.Override("r", "d_user_x_"); ok {
		t.Error("expired override still in force")
	}
	if err := b.DeleteEnforce(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	a.Sync(ctx)
	if _, ok := a.Percent("r"); ok || len(a.Overrides()) != 0 {
		t.Errorf("a still has %v %v", a.Enforcements(), a.Overrides())
	}
}

func TestAPIAuth(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	actions, err := control.NewActions(reg)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Options{})
	defer store.Close()
	api := &control.API{Control: control.New(ctx, control.Options{}), Actions: actions, Resetter: store,
		Rules: func(rule string) []string {
			if rule == "per-ip" {
				return []string{"per-ip"}
			}
			return nil
		},
		Targets: func(_ context.Context, id, rule string) ([]control.Target, error) {
			return []control.Target{{Rule: "per-ip", Key: "sl:gcra:1000ms:d_ip_" + id + "_"}}, nil
		}}
	mux := http.NewServeMux()
	api.Register(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	call := func(method, path, token, body string) int {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := call("POST", "/admin/reset", "", `{"identity":"x"}`); got != http.StatusForbidden {
		t.Errorf("no token configured: got %d, want 403", got)
	}
	api.Token = func() string { return "0123456789abcdef0123" }
	for _, tok := range []string{"", "wrong", "0123456789abcdef012"} {
		if got := call("POST", "/admin/reset", tok, `{"identity":"x"}`); got != http.StatusUnauthorized {
			t.Errorf("token %q: got %d, want 401", tok, got)
		}
	}
	tok := api.Token()
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/admin/reset", `{"identity":"x"}`, 200},
		{"POST", "/admin/reset", `{"identity":"x","rule":"nope"}`, 400},
		{"POST", "/admin/reset", `{"identity":""}`, 400},
		{"POST", "/admin/reset", `{"identity":"x","bogus":1}`, 400},
		{"POST", "/admin/override", `{"identity":"x","rule":"per-ip","rate":100,"period":"1m","ttl":"10m"}`, 200},
		{"POST", "/admin/override", `{"identity":"x","rule":"per-ip","rate":-1,"period":"1m","ttl":"10m"}`, 400},
		{"POST", "/admin/override", `{"identity":"x","rule":"per-ip","rate":1,"period":"1m","ttl":"100000h"}`, 400},
		{"DELETE", "/admin/override", `{"identity":"x","rule":"per-ip"}`, 200},
		{"POST", "/admin/enforce", `{"rule":"per-ip","percent":10}`, 200},
		{"POST", "/admin/enforce", `{"rule":"per-ip","percent":110}`, 400},
		{"DELETE", "/admin/enforce", `{"rule":"per-ip"}`, 200},
		{"GET", "/admin/state", ``, 200},
	} {
		if got := call(c.method, c.path, tok, c.body); got != c.want {
			t.Errorf("%s %s %s: got %d, want %d", c.method, c.path, c.body, got, c.want)
		}
	}
	if got := counterValue(t, reg, "reset", "unauthorized"); got != 3 {
		t.Errorf("got %v unauthorized resets counted, want 3", got)
	}
	if got := counterValue(t, reg, "override_set", "ok"); got != 1 {
		t.Errorf("got %v override_set ok, want 1", got)
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(control.TokenEnv, "from-the-environment-1234")
	if tok, err := control.LoadToken(""); err != nil || tok != "from-the-environment-1234" {
		t.Errorf("env: got %q %v", tok, err)
	}
	f := dir + "/tok"
	writeFile(t, f, "from-the-file-0123456789\nignored\n")
	if tok, err := control.LoadToken(f); err != nil || tok != "from-the-file-0123456789" {
		t.Errorf("file: got %q %v", tok, err)
	}
	writeFile(t, f, "short\n")
	if _, err := control.LoadToken(f); err == nil {
		t.Error("short token accepted")
	}
	if _, err := control.LoadToken(dir + "/missing"); err == nil {
		t.Error("missing file accepted")
	}
}
