package clientmetrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluicehq/sluice/httpclient"
	"github.com/sluicehq/sluice/httpclient/clientmetrics"
)

func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()

	m := clientmetrics.New(clientmetrics.Options{})
	t := httpclient.New(httpclient.Options{Observer: m})
	m.Watch(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m) // and serve reg with promhttp.HandlerFor

	resp, err := (&http.Client{Transport: t}).Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(testutil.CollectAndCount(m, "sluice_client_attempts_total"), "attempt series")
	// Output: 1 attempt series
}
