package clientmetrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/httpclient"
	"github.com/sluicehq/sluice/httpclient/clientmetrics"
)

// TestMetrics: a real server that answers 429 once, then 200: the
// attempts, the retry and the pause are counted under the host, and the
// host's rate is reported.
func TestMetrics(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(429)
			return
		}
		w.Header().Set("RateLimit-Policy", `"p";q=100;w=10`)
		w.Header().Set("RateLimit", `"p";r=90;t=5`)
	}))
	defer srv.Close()
	m := clientmetrics.New(clientmetrics.Options{})
	tr := httpclient.New(httpclient.Options{Observer: m, Rate: 100, Burst: 10})
	m.Watch(tr)
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	host := strings.TrimPrefix(srv.URL, "http://")
	want := fmt.Sprintf(`
# HELP sluice_client_attempts_total Attempts sent, by host and status code ("error" when no response came back).
# TYPE sluice_client_attempts_total counter
sluice_client_attempts_total{code="200",host=%[1]q} 1
sluice_client_attempts_total{code="429",host=%[1]q} 1
# HELP sluice_client_pauses_total Host pauses after a 429 or 503, by host.
# TYPE sluice_client_pauses_total counter
sluice_client_pauses_total{host=%[1]q} 1
# HELP sluice_client_retries_total Retries about to wait, by host.
# TYPE sluice_client_retries_total counter
sluice_client_retries_total{host=%[1]q} 1
# HELP sluice_client_in_flight Requests holding one of each host's concurrency slots.
# TYPE sluice_client_in_flight gauge
sluice_client_in_flight{host=%[1]q} 0
`, host)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"sluice_client_attempts_total", "sluice_client_pauses_total", "sluice_client_retries_total", "sluice_client_in_flight"); err != nil {
		t.Error(err)
	}
	// The announced budget paces the host: 90 left for 5 s.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "sluice_client_rate" {
			for _, mt := range mf.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "paced" && l.GetValue() == "true" {
						found = true
					}
				}
			}
		}
	}
	if !found {
		t.Error("sluice_client_rate has no paced=\"true\" series after an announced budget")
	}
}

// TestHostBound: past MaxHosts, hosts count under __other__.
func TestHostBound(t *testing.T) {
	m := clientmetrics.New(clientmetrics.Options{MaxHosts: 3})
	for i := range 100 {
		m.Observe(httpclient.Event{Kind: httpclient.Retry, Host: fmt.Sprintf("h%d.example", i)})
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	if n := testutil.CollectAndCount(m, "sluice_client_retries_total"); n != 4 {
		t.Errorf("%d retry series, want 3 hosts and %s", n, clientmetrics.Other)
	}
}
