package clientmetrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/breaker"
	"github.com/sluicehq/sluice/httpclient"
)

// DefaultMaxHosts is the default bound on host labels.
const DefaultMaxHosts = 1000

// Other is the host label of the hosts past Options.MaxHosts.
const Other = "__other__"

// Options configures Metrics.
type Options struct {
	// Namespace prefixes every metric name. Empty means "sluice_client".
	Namespace string
	// MaxHosts bounds the distinct host labels. Zero means
	// DefaultMaxHosts.
	MaxHosts int
}

// Metrics counts a Transport's events per host and reports its hosts'
// state. It is safe for concurrent use.
type Metrics struct {
	max int

	requests  *prometheus.CounterVec // host, code ("" → "error")
	retries   *prometheus.CounterVec
	pauses    *prometheus.CounterVec
	pauseSecs *prometheus.CounterVec
	waitSecs  *prometheus.CounterVec
	giveUps   *prometheus.CounterVec
	breaker   *prometheus.GaugeVec
	rateDesc  *prometheus.Desc
	inflDesc  *prometheus.Desc

	mu    sync.Mutex
	hosts map[string]bool
	ts    []*httpclient.Transport
}

var _ httpclient.Observer = (*Metrics)(nil)
var _ prometheus.Collector = (*Metrics)(nil)

// New returns Metrics. Pass it as the Transport's Observer, Watch the
// Transport, and register it.
func New(o Options) *Metrics {
	ns := o.Namespace
	if ns == "" {
		ns = "sluice_client"
	}
	if o.MaxHosts <= 0 {
		o.MaxHosts = DefaultMaxHosts
	}
	byHost := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, []string{"host"})
	}
	return &Metrics{
		max:   o.MaxHosts,
		hosts: map[string]bool{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "attempts_total",
			Help: "Attempts sent, by host and status code (\"error\" when no response came back)."}, []string{"host", "code"}),
		retries:   byHost("retries_total", "Retries about to wait, by host."),
		pauses:    byHost("pauses_total", "Host pauses after a 429 or 503, by host."),
		pauseSecs: byHost("pause_seconds_total", "Length of the host pauses, by host."),
		waitSecs:  byHost("wait_seconds_total", "Time attempts waited for their host (pause, slot, token), by host."),
		giveUps:   byHost("give_ups_total", "Requests that failed for good, by host."),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "breaker_state",
			Help: "Each host's circuit breaker: 0 closed, 1 half-open, 2 open."}, []string{"host"}),
		rateDesc: prometheus.NewDesc(ns+"_rate", "Each host's current rate, requests per second.", []string{"host", "paced"}, nil),
		inflDesc: prometheus.NewDesc(ns+"_in_flight", "Requests holding one of each host's concurrency slots.", []string{"host"}, nil),
	}
}

// Watch makes the Metrics report t's hosts' rate and in-flight requests
// when scraped.
func (m *Metrics) Watch(t *httpclient.Transport) {
	m.mu.Lock()
	m.ts = append(m.ts, t)
	m.mu.Unlock()
}

// label returns host, or Other once MaxHosts hosts have labels.
func (m *Metrics) label(host string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hosts[host] {
		return host
	}
	if len(m.hosts) >= m.max {
		return Other
	}
	m.hosts[host] = true
	return host
}

// Observe counts e.
func (m *Metrics) Observe(e httpclient.Event) {
	h := m.label(e.Host)
	switch e.Kind {
	case httpclient.Attempt:
		code := "error"
		if e.Status != 0 {
			code = strconv.Itoa(e.Status)
		}
		m.requests.WithLabelValues(h, code).Inc()
	case httpclient.Retry:
		m.retries.WithLabelValues(h).Inc()
	case httpclient.Pause:
		m.pauses.WithLabelValues(h).Inc()
		m.pauseSecs.WithLabelValues(h).Add(e.Delay.Seconds())
	case httpclient.Wait:
		m.waitSecs.WithLabelValues(h).Add(e.Delay.Seconds())
	case httpclient.GiveUp:
		m.giveUps.WithLabelValues(h).Inc()
	case httpclient.BreakerChange:
		v := 0.0
		switch e.To {
		case breaker.HalfOpen:
			v = 1
		case breaker.Open:
			v = 2
		}
		m.breaker.WithLabelValues(h).Set(v)
	}
}

func (m *Metrics) vecs() []prometheus.Collector {
	return []prometheus.Collector{m.requests, m.retries, m.pauses, m.pauseSecs, m.waitSecs, m.giveUps, m.breaker}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.vecs() {
		c.Describe(ch)
	}
	ch <- m.rateDesc
	ch <- m.inflDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.vecs() {
		c.Collect(ch)
	}
	m.mu.Lock()
	ts := append([]*httpclient.Transport(nil), m.ts...)
	m.mu.Unlock()
	type agg struct {
		rate     float64
		inflight int
		paced    bool
	}
	byHost := map[string]*agg{}
	for _, t := range ts {
		for _, s := range t.Hosts() {
			h := m.label(s.Host)
			a := byHost[h]
			if a == nil {
				a = &agg{}
				byHost[h] = a
			}
			a.rate += s.Rate
			a.inflight += s.InFlight
			a.paced = a.paced || s.Paced
		}
	}
	for h, a := range byHost {
		ch <- prometheus.MustNewConstMetric(m.rateDesc, prometheus.GaugeValue, a.rate, h, strconv.FormatBool(a.paced))
		ch <- prometheus.MustNewConstMetric(m.inflDesc, prometheus.GaugeValue, float64(a.inflight), h)
	}
}
