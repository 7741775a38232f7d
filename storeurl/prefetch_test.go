package storeurl

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

func TestTakePrefetch(t *testing.T) {
	for _, c := range []struct {
		in, out   string
		ttl       time.Duration
		instances int
		on        bool
		err       string
	}{
		{in: "redis://h:6379", out: "redis://h:6379"},
		{in: "redis://h:6379?dial_timeout=1s", out: "redis://h:6379?dial_timeout=1s"},
		{in: "redis://h:6379?prefetch=on", out: "redis://h:6379", on: true},
		// A path of "/" alone left names no database (rueidis refuses it).
		{in: "redis://h:6379/?prefetch=on", out: "redis://h:6379", on: true},
		{in: "redis://h:6379/?lease=on&dial_timeout=1s", out: "redis://h:6379/?dial_timeout=1s", on: true},
		{in: "redis://h:6379/2?prefetch=250ms&dial_timeout=1s", out: "redis://h:6379/2?dial_timeout=1s", on: true, ttl: 250 * time.Millisecond},
		{in: "redis-cluster://a:1,b:2?prefetch=on&prefetch_instances=40", out: "redis-cluster://a:1,b:2", on: true, instances: 40},
		{in: "redis://h:6379?prefetch=off&prefetch_instances=4", out: "redis://h:6379"},
		{in: "redis://:pw@h:6379?prefetch=fast", err: "prefetch=\"fast\""},
		// The deprecated spellings mean the same (Open warns about them).
		{in: "redis://h:6379?lease=on", out: "redis://h:6379", on: true},
		{in: "redis://h:6379/2?lease=250ms&dial_timeout=1s", out: "redis://h:6379/2?dial_timeout=1s", on: true, ttl: 250 * time.Millisecond},
		{in: "redis-cluster://a:1,b:2?lease=on&lease_instances=40", out: "redis-cluster://a:1,b:2", on: true, instances: 40},
		{in: "redis://h:6379?prefetch=on&lease_instances=3", out: "redis://h:6379", on: true, instances: 3},
		{in: "redis://h:6379?lease=off", out: "redis://h:6379"},
		{in: "redis://:pw@h:6379?lease=fast", err: "prefetch=\"fast\""},
		{in: "redis://h:6379?lease=on&prefetch=on", err: "give prefetch only"},
		{in: "redis://:pw@h:6379?prefetch=2h", err: "from 1ms to 1m"},
		{in: "redis://h:6379?prefetch_instances=4", err: "without prefetch=on"},
		{in: "redis://h:6379?prefetch=on&prefetch_instances=0", err: "from 1 to"},
		{in: "redis://h:6379?prefetch=on&prefetch=off", err: "once"},
		{in: "redis://h:6379?prefetch=%zz", err: "query"},
	} {
		out, o, err := takePrefetch(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), ":pw@") {
				t.Errorf("%s: err %v, want one containing %q, without the password", c.in, err, c.err)
			}
			continue
		}
		if err != nil || out != c.out || (o != nil) != c.on {
			t.Errorf("%s: %q, %+v, %v; want %q, on %v", c.in, out, o, err, c.out, c.on)
			continue
		}
		if o != nil && (o.TTL != c.ttl || o.Instances != c.instances || !o.ExactOthers) {
			t.Errorf("%s: options %+v", c.in, o)
		}
	}
}

func FuzzTakePrefetch(f *testing.F) {
	for _, s := range []string{"redis://h:6379?prefetch=on", "redis://h?prefetch=1ms&prefetch_instances=3&x=%41", "redis://h?prefetch=", "memory", "redis://h?prefetch=on&prefetch=on", "?;lease=1", "redis://h?lease=on&lease_instances=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, o, err := takePrefetch(raw)
		if err != nil {
			return
		}
		if o != nil && (o.TTL < 0 || o.TTL > time.Minute || o.Instances < 0) {
			t.Fatalf("%q: options %+v", raw, o)
		}
		if o != nil && (strings.Contains(out, "lease=") || strings.Contains(out, "prefetch=")) {
			t.Fatalf("%q: %q keeps the parameter", raw, out)
		}
	})
}

// TestPrefetchOpen: a store opened with ?prefetch=on decides a hot key from
// slices, leaky_bucket rules exactly, and gives the rest back on Close.
func TestPrefetchOpen(t *testing.T) {
	srv := redistest.Start(t)
	st, err := Open(context.Background(), "redis://"+srv.Addr+"?prefetch=on&prefetch_instances=1", Options{Redis: redisstore.Options{Timeout: 10 * time.Second, RequireAtStart: true}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Prefetch == nil {
		t.Fatal("no prefetch mode")
	}
	ctx := context.Background()
	lim := ratelimit.PerHour(100000) // largest slice 1000 with one instance
	for range 200 {
		if d, err := st.Apply(ctx, ratelimit.Request{Key: "hot", Limit: lim, N: 1}); err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	if _, err := st.Apply(ctx, ratelimit.Request{Key: "q", Limit: lim, Algorithm: ratelimit.LeakyBucket, N: 1}); err != nil {
		t.Fatalf("leaky_bucket on a prefetched store: %v, want it decided exactly", err)
	}
	if s := st.Prefetch.Stats(); s.Takes == 0 || s.Local == 0 || s.Exact < 8 {
		t.Errorf("stats %+v: want slices, local decisions and exact ones", s)
	}
	reg := prometheus.NewRegistry()
	if err := st.Register(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		seen[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	if seen["sluice_redis_prefetch_local_total"] == 0 || seen["sluice_redis_prefetch_slices_total"] == 0 || seen["sluice_store_prefetch_keys"] != 1 {
		t.Errorf("prefetch metrics %v", seen)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPrefetchDeprecatedSpelling: a store URL with lease=on (prefetch=on's
// old spelling) still opens prefetch mode, and Open says so in one warning
// line; Warnings names it, and nothing for the new spelling.
func TestPrefetchDeprecatedSpelling(t *testing.T) {
	if w := Warnings("redis://h:6379?prefetch=on&prefetch_instances=2"); w != nil {
		t.Errorf("Warnings(prefetch=on): %q, want none", w)
	}
	w := Warnings("redis://:pw@h:6379?lease=on&lease_instances=2")
	if len(w) != 2 || !strings.Contains(w[0], "write prefetch=on") || !strings.Contains(w[1], "write prefetch_instances=2") || strings.Contains(strings.Join(w, ""), "pw") {
		t.Errorf("Warnings(lease=on&lease_instances=2): %q", w)
	}
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	// No server answers: the store opens anyway (its failure policy answers).
	st, err := Open(context.Background(), "redis://127.0.0.1:1?lease=on", Options{Logger: log, Redis: redisstore.Options{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Prefetch == nil || st.Store != ratelimit.Store(st.Prefetch) {
		t.Errorf("lease=on: Prefetch %v, deciding %T; want prefetch mode", st.Prefetch, st.Store)
	}
	if got := logs.String(); strings.Count(got, "level=WARN") != 1 || strings.Count(got, "URL parameter lease is deprecated") != 1 || !strings.Contains(got, "write prefetch=on") {
		t.Errorf("log:\n%s\nwant one warning about lease", got)
	}
}
