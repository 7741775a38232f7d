package storeurl_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/storeurl"
)

// TestRedisDownAtStart: a Redis URL with nothing listening opens; the
// failure policy answers; Ready and sluice_store_up say so.
func TestRedisDownAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	st, err := storeurl.Open(context.Background(), "redis://:pw@"+addr, storeurl.Options{Redis: redisstore.Options{OnError: ratelimit.FailAllow}})
	if err != nil {
		t.Fatalf("Open with Redis down = %v, want a store", err)
	}
	defer st.Close()
	d, err := st.Apply(context.Background(), ratelimit.Request{Key: "k", Limit: ratelimit.PerSecond(1), N: 1})
	if err != nil || !d.Allowed {
		t.Errorf("Apply with Redis down and allow = %+v, %v; want allowed", d, err)
	}
	ok, detail := st.Ready()
	if ok || !strings.Contains(detail, "xxxxx") || strings.Contains(detail, ":pw@") {
		t.Errorf("Ready = %v %q; want not ready, with the password hidden", ok, detail)
	}
	reg := prometheus.NewRegistry()
	if err := st.Register(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_store_up" && mf.GetMetric()[0].GetGauge().GetValue() != 0 {
			t.Error("sluice_store_up = 1 with Redis down")
		}
	}
}
