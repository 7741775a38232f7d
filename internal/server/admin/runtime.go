package admin

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// RegisterRuntime adds the standard Go runtime and process collectors
// (go_goroutines, go_memstats_*, go_gc_duration_seconds,
// process_resident_memory_bytes, process_cpu_seconds_total,
// process_open_fds, ...) and go_build_info to reg, so that both servers'
// /metrics have them. A registry that has them already (one given by a
// program that registered them itself) keeps its own.
func RegisterRuntime(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	} {
		if err := reg.Register(c); err != nil {
			var dup prometheus.AlreadyRegisteredError
			if !errors.As(err, &dup) {
				return err
			}
		}
	}
	return nil
}
