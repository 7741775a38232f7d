package storeurl

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
)

func TestTakeLease(t *testing.T) {
	for _, c := range []struct {
		in, out   string
		ttl       time.Duration
		instances int
		on        bool
		err       string
	}{
		{in: "redis://h:6379", out: "redis://h:6379"},
		{in: "redis://h:6379?dial_timeout=1s", out: "redis://h:6379?dial_timeout=1s"},
		{in: "redis://h:6379?lease=on", out: "redis://h:6379", on: true},
		{in: "redis://h:6379/2?lease=250ms&dial_timeout=1s", out: "redis://h:6379/2?dial_timeout=1s", on: true, ttl: 250 * time.Millisecond},
		{in: "redis-cluster://a:1,b:2?lease=on&lease_instances=40", out: "redis-cluster://a:1,b:2", on: true, instances: 40},
		{in: "redis://h:6379?lease=off&lease_instances=4", out: "redis://h:6379"},
		{in: "redis://:pw@h:6379?lease=fast", err: "lease=\"fast\""},
		{in: "redis://:pw@h:6379?lease=2h", err: "from 1ms to 1m"},
		{in: "redis://h:6379?lease_instances=4", err: "without lease=on"},
		{in: "redis://h:6379?lease=on&lease_instances=0", err: "from 1 to"},
		{in: "redis://h:6379?lease=on&lease=off", err: "once"},
		{in: "redis://h:6379?lease=%zz", err: "query"},
	} {
		out, o, err := takeLease(c.in)
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

func FuzzTakeLease(f *testing.F) {
	for _, s := range []string{"redis://h:6379?lease=on", "redis://h?lease=1ms&lease_instances=3&x=%41", "redis://h?lease=", "memory", "redis://h?lease=on&lease=on", "?;lease=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out, o, err := takeLease(raw)
		if err != nil {
			return
		}
		if o != nil && (o.TTL < 0 || o.TTL > time.Minute || o.Instances < 0) {
			t.Fatalf("%q: options %+v", raw, o)
		}
		if o != nil && strings.Contains(out, "lease=") {
			t.Fatalf("%q: %q keeps the parameter", raw, out)
		}
	})
}

// TestLeaseOpen: a store opened with ?lease=on decides a hot key from
// slices, leaky_bucket rules exactly, and gives the rest back on Close.
func TestLeaseOpen(t *testing.T) {
	srv := redistest.Start(t)
	st, err := Open(context.Background(), "redis://"+srv.Addr+"?lease=on&lease_instances=1", Options{Redis: redisstore.Options{Timeout: 10 * time.Second, RequireAtStart: true}})
	if err != nil {
		t.Fatal(err)
	}
	if st.Leased == nil {
		t.Fatal("no leased mode")
	}
	ctx := context.Background()
	lim := ratelimit.PerHour(100000) // largest slice 1000 with one instance
	for range 200 {
		if d, err := st.Apply(ctx, ratelimit.Request{Key: "hot", Limit: lim, N: 1}); err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	if _, err := st.Apply(ctx, ratelimit.Request{Key: "q", Limit: lim, Algorithm: ratelimit.LeakyBucket, N: 1}); err != nil {
		t.Fatalf("leaky_bucket on a leased store: %v, want it decided exactly", err)
	}
	if s := st.Leased.Stats(); s.Takes == 0 || s.Local == 0 || s.Exact < 8 {
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
	if seen["sluice_redis_lease_local_total"] == 0 || seen["sluice_redis_lease_slices_total"] == 0 || seen["sluice_store_lease_keys"] != 1 {
		t.Errorf("lease metrics %v", seen)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
