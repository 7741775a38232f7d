// Package clientmetrics exports what a polite client does as Prometheus
// metrics, per host: its rate and requests in flight, the answers it got
// (429 and 503 among them), its retries, pauses and waits, and its
// breaker's state.
//
// A Metrics is both the httpclient.Observer that counts the events and the
// prometheus.Collector that reads each host's current rate and in-flight
// count from the Transport when scraped:
//
//	m := clientmetrics.New(clientmetrics.Options{})
//	t := httpclient.New(httpclient.Options{Observer: m})
//	m.Watch(t)
//	prometheus.MustRegister(m)
//
// Host labels are bounded (Options.MaxHosts): past the bound, new hosts
// count under the host "__other__", so that a crawl of a million hosts
// does not make a million series. Package httpclient itself has no
// metrics dependency; this package is the one that brings Prometheus in.
package clientmetrics
