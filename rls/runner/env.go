package runner

import (
	"errors"
	"flag"
	"fmt"
	"github.com/sluicehq/sluice/internal/redact"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/rls"
)

// sluice rls reads envoyproxy/ratelimit's environment (its
// src/settings/settings.go) with the same meanings, so that a Deployment
// written for that server runs sluice with only the image changed. Each
// variable is one of:
//
//   - same: the same meaning under one flag (NEAR_LIMIT_RATIO is
//     --near-limit-ratio);
//   - mapped: read with the variables it goes with, and turned into flags
//     (RUNTIME_ROOT, RUNTIME_SUBDIRECTORY and RUNTIME_APPDIRECTORY make
//     --config-dir; REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_URL, REDIS_TLS and
//     REDIS_AUTH make --store and --store-password);
//   - no effect: read and checked, but sluice needs nothing to do what it
//     asks (REDIS_POOL_SIZE: sluice pipelines on shared connections), or
//     upstream itself ignores it in that configuration; sluice rls logs
//     each such variable at start, with why;
//   - refused: a value that asks for what sluice does not do (memcache,
//     DogStatsD, GRPC_UDS) stops the command at start with a
//     message naming the variable, never silently ignored.
//
// A group of variables is read when one of them is set, with upstream's
// defaults for the others (REDIS_URL alone is a Unix socket, as upstream's
// REDIS_SOCKET_TYPE default says); with none set, sluice's own defaults
// apply. A flag on the command line, or its SLUICE_* variable, wins over
// these.

// upstreamVar is one of envoyproxy/ratelimit's variables and what sluice
// rls does with it.
type upstreamVar struct {
	name string
	def  string // upstream's default
	how  string // "same", "mapped", "no effect" or "refused" (refused for some values: see note)
	// flags are the flags the variable may set.
	flags []string
	note  string
}

// upstreamVars lists every variable of envoyproxy/ratelimit's settings.go
// (master, July 2026), in its order, and Envoy Gateway's
// GRPC_SERVER_TLS_CA_CERT.
var upstreamVars = []upstreamVar{
	{"HOST", "0.0.0.0", "mapped", []string{"http-listen"}, "with PORT: the HTTP listener (/json, /healthcheck, /metrics)"},
	{"PORT", "8080", "mapped", []string{"http-listen"}, "with HOST"},
	{"DEBUG_HOST", "0.0.0.0", "mapped", []string{"debug-listen"}, "with DEBUG_PORT: the debug listener (/debug/pprof/, /rlconfig); sluice's is off unless one of the two is set"},
	{"DEBUG_PORT", "6070", "mapped", []string{"debug-listen"}, "with DEBUG_HOST"},
	{"GRPC_UDS", "", "refused", nil, "refused when set: sluice listens on TCP only"},
	{"GRPC_HOST", "0.0.0.0", "mapped", []string{"grpc-listen"}, "with GRPC_PORT: the gRPC listener"},
	{"GRPC_PORT", "8081", "mapped", []string{"grpc-listen"}, "with GRPC_HOST"},
	{"GRPC_MAX_CONNECTION_AGE", "24h", "same", []string{"max-connection-age"}, "the same default, 24h, with ±10% jitter"},
	{"GRPC_MAX_CONNECTION_AGE_GRACE", "1h", "same", []string{"max-connection-age-grace"}, "the same default, 1h"},
	{"GRPC_SERVER_USE_TLS", "false", "mapped", []string{"grpc-tls-cert", "grpc-tls-key", "grpc-tls-client-ca", "grpc-tls-client-san"}, "true serves gRPC over TLS with the four below; without it they are not read, as upstream"},
	{"GRPC_SERVER_TLS_CERT", "", "mapped", []string{"grpc-tls-cert"}, "with GRPC_SERVER_USE_TLS=true (required then)"},
	{"GRPC_SERVER_TLS_KEY", "", "mapped", []string{"grpc-tls-key"}, "with GRPC_SERVER_USE_TLS=true (required then)"},
	{"GRPC_CLIENT_TLS_CACERT", "", "mapped", []string{"grpc-tls-client-ca"}, "with GRPC_SERVER_USE_TLS=true: clients must present a certificate it verifies (mTLS)"},
	{"GRPC_CLIENT_TLS_SAN", "", "mapped", []string{"grpc-tls-client-san"}, "with GRPC_SERVER_USE_TLS=true: the SAN a client certificate must carry"},
	{"GRPC_SERVER_TLS_CA_CERT", "", "no effect", nil, "Envoy Gateway sets it, but envoyproxy/ratelimit never reads it (its client CA is GRPC_CLIENT_TLS_CACERT); sluice does as upstream"},
	{"LOG_LEVEL", "WARN", "same", []string{"log-level"}, "trace and debug are debug, warning is warn, fatal and panic are error; any case; unset, sluice logs from info"},
	{"LOG_FORMAT", "text", "same", []string{"log-format"}, "json or text"},
	{"CONFIG_TYPE", "FILE", "mapped", []string{"config-type"}, "FILE reads RUNTIME_*; GRPC_XDS_SOTW is --config-type xds and reads CONFIG_GRPC_XDS_*"},
	{"FORCE_START_WITHOUT_INITIAL_CONFIG", "false", "no effect", nil, "with xDS sluice always starts at once, with no rules until the first snapshot (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED keeps it not ready until then); with files the first configuration is read at start"},
	{"CONFIG_GRPC_XDS_NODE_ID", "default", "same", []string{"xds-node-id"}, "with CONFIG_TYPE=GRPC_XDS_SOTW"},
	{"CONFIG_GRPC_XDS_NODE_METADATA", "", "same", []string{"xds-node-metadata"}, "with CONFIG_TYPE=GRPC_XDS_SOTW: KEY=VALUE,...; an entry without '=' is refused (upstream drops it)"},
	{"CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000", "same", []string{"xds-server"}, "with CONFIG_TYPE=GRPC_XDS_SOTW, the same default"},
	{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3s", "no effect", nil, "sluice redials with its own backoff"},
	{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "", "same", []string{"xds-headers"}, "with CONFIG_TYPE=GRPC_XDS_SOTW: NAME:VALUE,... sent on each stream"},
	{"CONFIG_GRPC_XDS_SERVER_USE_TLS", "false", "mapped", []string{"xds-tls", "xds-tls-cert", "xds-tls-key", "xds-tls-ca", "xds-tls-san"}, "true connects with TLS, with the four below"},
	{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "", "mapped", []string{"xds-tls-cert"}, "with CONFIG_GRPC_XDS_SERVER_USE_TLS=true"},
	{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "", "mapped", []string{"xds-tls-key"}, "with CONFIG_GRPC_XDS_SERVER_USE_TLS=true"},
	{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "", "mapped", []string{"xds-tls-ca"}, "with CONFIG_GRPC_XDS_SERVER_USE_TLS=true"},
	{"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "", "mapped", []string{"xds-tls-san"}, "with CONFIG_GRPC_XDS_SERVER_USE_TLS=true: the name the server's certificate must carry"},
	{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10s", "no effect", nil, "sluice redials with its own backoff"},
	{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "60s", "no effect", nil, "sluice redials with its own backoff"},
	{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.5", "no effect", nil, "sluice redials with its own backoff"},
	{"XDS_CLIENT_BACKOFF_JITTER", "true", "no effect", nil, "sluice redials with its own backoff"},
	{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "", "same", []string{"xds-max-msg-size"}, "with CONFIG_TYPE=GRPC_XDS_SOTW; unset, 4 MiB (gRPC's default, as upstream)"},
	{"USE_DOG_STATSD", "false", "refused", nil, "refused when true: no DogStatsD sink"},
	{"USE_DOG_STATSD_MOGRIFIERS", "", "refused", nil, "refused when set: no DogStatsD sink"},
	{"USE_STATSD", "true", "mapped", []string{"statsd"}, "true sends upstream's stats over TCP, as its sink, to --statsd tcp://STATSD_HOST:STATSD_PORT; unset, sluice sends none (upstream's default is on)"},
	{"STATSD_HOST", "localhost", "mapped", []string{"statsd"}, "with USE_STATSD=true"},
	{"STATSD_PORT", "8125", "mapped", []string{"statsd"}, "with USE_STATSD=true"},
	{"EXTRA_TAGS", "", "same", []string{"statsd-tags"}, "with USE_STATSD=true: NAME:VALUE,…"},
	{"STATS_FLUSH_INTERVAL", "10s", "same", []string{"statsd-flush-interval"}, "with USE_STATSD=true"},
	{"DISABLE_STATS", "false", "no effect", nil, "true turns USE_STATSD off; /metrics stays on the HTTP listener"},
	{"USE_PROMETHEUS", "false", "mapped", []string{"metrics-listen"}, "true serves /metrics on PROMETHEUS_ADDR too (--metrics-listen); /metrics is on the HTTP listener (PORT) either way"},
	{"PROMETHEUS_ADDR", ":9090", "mapped", []string{"metrics-listen"}, "with USE_PROMETHEUS=true; on the HTTP listener's port it needs no listener of its own"},
	{"PROMETHEUS_PATH", "/metrics", "refused", nil, "with USE_PROMETHEUS=true, refused unless /metrics"},
	{"PROMETHEUS_MAPPER_YAML", "", "refused", nil, "refused unless the file is upstream's default mapping (as Envoy Gateway's statsd-exporter-config is), which is built in (--metric-labels)"},
	{"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "false", "no effect", nil, "sluice exports no per-method response_time series"},
	{"RUNTIME_ROOT", "/srv/runtime_data/current", "mapped", []string{"config-dir"}, "--config-dir is RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY"},
	{"RUNTIME_SUBDIRECTORY", "", "mapped", []string{"config-dir"}, "with RUNTIME_ROOT"},
	{"RUNTIME_APPDIRECTORY", "config", "mapped", []string{"config-dir"}, "with RUNTIME_ROOT"},
	{"RUNTIME_IGNOREDOTFILES", "false", "no effect", nil, "sluice always skips dot files and subdirectories"},
	{"RUNTIME_WATCH_ROOT", "true", "no effect", nil, "sluice polls the files' content (--poll), which sees a changed file and a swapped symlink alike"},
	{"EXPIRATION_JITTER_MAX_SECONDS", "300", "no effect", nil, "sluice's keys expire when their window ends, without jitter"},
	{"LOCAL_CACHE_SIZE_IN_BYTES", "0", "same", []string{"local-cache-size-bytes"}, "the local over-limit cache, on any store"},
	{"NEAR_LIMIT_RATIO", "0.8", "same", []string{"near-limit-ratio"}, ""},
	{"CACHE_KEY_PREFIX", "", "same", []string{"key-prefix"}, "no '{' or '}'"},
	{"BACKEND_TYPE", "redis", "refused", nil, "redis reads REDIS_*; memcache is refused"},
	{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "false", "same", []string{"stop-increment-when-over-limit"}, ""},
	{"LIMIT_RESPONSE_HEADERS_ENABLED", "false", "mapped", []string{"headers"}, "true is --headers envoy"},
	{"LIMIT_LIMIT_HEADER", "RateLimit-Limit", "mapped", []string{"limit-header-names"}, "the first of --limit-header-names"},
	{"LIMIT_REMAINING_HEADER", "RateLimit-Remaining", "mapped", []string{"limit-header-names"}, "the second of --limit-header-names"},
	{"LIMIT_RESET_HEADER", "RateLimit-Reset", "mapped", []string{"limit-header-names"}, "the third of --limit-header-names"},
	{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "false", "same", []string{"healthy-with-config"}, "not serving until a configuration with a domain is loaded"},
	{"REDIS_SOCKET_TYPE", "unix", "mapped", []string{"store"}, "tcp or unix: with REDIS_URL, --store redis://HOST:PORT or unix://PATH"},
	{"REDIS_TYPE", "SINGLE", "mapped", []string{"store"}, "SINGLE (redis://), CLUSTER (redis-cluster://) or SENTINEL (redis-sentinel://)"},
	{"REDIS_URL", "/var/run/nutcracker/ratelimit.sock", "mapped", []string{"store"}, "HOST:PORT, a socket path, a comma-separated list for CLUSTER, or MASTER,SENTINEL:PORT,… for SENTINEL"},
	{"REDIS_POOL_SIZE", "10", "no effect", nil, "no pool: calls are pipelined on shared connections"},
	{"REDIS_AUTH", "", "mapped", []string{"store", "store-password"}, "PASSWORD or USER:PASSWORD: the user goes in --store, the password in --store-password (never in argv or logs)"},
	{"REDIS_TLS", "false", "mapped", []string{"store"}, "true makes --store rediss://"},
	{"REDIS_TLS_CLIENT_CERT", "", "mapped", []string{"store"}, "with REDIS_TLS=true: --store rediss://…?tls_cert=FILE"},
	{"REDIS_TLS_CLIENT_KEY", "", "mapped", []string{"store"}, "with REDIS_TLS=true: --store rediss://…?tls_key=FILE"},
	{"REDIS_TLS_CACERT", "", "mapped", []string{"store"}, "with REDIS_TLS=true: --store rediss://…?tls_ca=FILE (else the system's roots)"},
	{"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "refused", nil, "refused when true"},
	{"REDIS_PIPELINE_WINDOW", "0", "no effect", nil, "sluice batches every call waiting, with no added delay"},
	{"REDIS_PIPELINE_LIMIT", "0", "no effect", nil, "deprecated and unused upstream"},
	{"REDIS_CLUSTER_PIPELINE_PARALLELISM", "1", "no effect", nil, "sluice sends each cluster node's batch at once"},
	{"REDIS_PERSECOND", "false", "refused", nil, "refused when true: one store for every unit"},
	{"REDIS_PERSECOND_SOCKET_TYPE", "unix", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_PERSECOND_TYPE", "SINGLE", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_PERSECOND_URL", "/var/run/nutcracker/ratelimitpersecond.sock", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_PERSECOND_POOL_SIZE", "10", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_PERSECOND_AUTH", "", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_PERSECOND_TLS", "false", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_SENTINEL_AUTH", "", "refused", nil, "refused when set: sluice asks the sentinels without a password"},
	{"REDIS_PERSECOND_SENTINEL_AUTH", "", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_PERSECOND_PIPELINE_WINDOW", "0", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_PERSECOND_PIPELINE_LIMIT", "0", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", "1", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "false", "refused", nil, "refused when true: sluice stays healthy while --on-store-error answers for Redis; /readyz and sluice_store_up say how Redis is"},
	{"REDIS_TIMEOUT", "10s", "same", []string{"store-timeout"}, "sluice's default is 100ms"},
	{"REDIS_PERSECOND_TIMEOUT", "10s", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT", "refused", nil, "WAIT has no effect (no pool); CREATE and ERROR are refused, as upstream refuses them"},
	{"REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", "WAIT", "no effect", nil, "read only with REDIS_PERSECOND=true"},
	{"REDIS_STARTUP_INITIAL_INTERVAL", "1s", "no effect", nil, "sluice starts with Redis down (--on-store-error answers) and reconnects in the background"},
	{"REDIS_STARTUP_MAX_INTERVAL", "30s", "no effect", nil, "as REDIS_STARTUP_INITIAL_INTERVAL"},
	{"REDIS_STARTUP_MAX_ELAPSED_TIME", "0", "no effect", nil, "as REDIS_STARTUP_INITIAL_INTERVAL: sluice never gives up"},
	{"MEMCACHE_HOST_PORT", "", "refused", nil, "refused when set: no memcached store"},
	{"MEMCACHE_MAX_IDLE_CONNS", "2", "no effect", nil, "read only with BACKEND_TYPE=memcache (refused)"},
	{"MEMCACHE_SRV", "", "refused", nil, "refused when set: no memcached store"},
	{"MEMCACHE_SRV_REFRESH", "0", "no effect", nil, "read only with BACKEND_TYPE=memcache (refused)"},
	{"MEMCACHE_TLS", "false", "no effect", nil, "read only with BACKEND_TYPE=memcache (refused)"},
	{"MEMCACHE_TLS_CLIENT_CERT", "", "no effect", nil, "read only with BACKEND_TYPE=memcache (refused)"},
	{"MEMCACHE_TLS_CLIENT_KEY", "", "no effect", nil, "read only with BACKEND_TYPE=memcache (refused)"},
	{"MEMCACHE_TLS_CACERT", "", "no effect", nil, "read only with BACKEND_TYPE=memcache (refused)"},
	{"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "no effect", nil, "read only with BACKEND_TYPE=memcache (refused)"},
	{"SHADOW_MODE", "false", "same", []string{"shadow-mode"}, ""},
	{"QUOTA_MODE", "false", "same", []string{"quota-mode"}, ""},
	{"RESPONSE_DYNAMIC_METADATA", "false", "same", []string{"response-dynamic-metadata"}, ""},
	{"MERGE_DOMAIN_CONFIG", "false", "refused", nil, "refused when true: a domain in two files is refused at load"},
	{"TRACING_ENABLED", "false", "mapped", []string{"tracing"}, "true makes a span of every call (--tracing), exported over OTLP to OTEL_EXPORTER_OTLP_ENDPOINT, with the five below"},
	{"TRACING_SERVICE_NAME", "RateLimit", "mapped", []string{"tracing-service-name"}, "with TRACING_ENABLED=true: service.name, RateLimit unless set, as upstream"},
	{"TRACING_SERVICE_NAMESPACE", "", "mapped", []string{"tracing-service-namespace"}, "with TRACING_ENABLED=true: service.namespace"},
	{"TRACING_SERVICE_INSTANCE_ID", "", "mapped", []string{"tracing-service-instance-id"}, "with TRACING_ENABLED=true: service.instance.id; unset, a random UUID, as upstream"},
	{"TRACING_EXPORTER_PROTOCOL", "http", "mapped", []string{"tracing-protocol"}, "with TRACING_ENABLED=true: http (OTLP/HTTP, protobuf) or grpc"},
	{"TRACING_SAMPLING_RATE", "1", "mapped", []string{"tracing-sampling-rate"}, "with TRACING_ENABLED=true: the fraction of new traces sampled, a caller's sampled trace always (parent based), as upstream; above 1 is 1, below 0 is 0"},
}

// UpstreamVarsByFlag returns, by flag name, the variables that may set it.
func UpstreamVarsByFlag() map[string][]string {
	m := map[string][]string{}
	for _, v := range upstreamVars {
		for _, f := range v.flags {
			m[f] = append(m[f], v.name)
		}
	}
	return m
}

// upstreamEnv reads envoyproxy/ratelimit's variables for one start.
type upstreamEnv struct {
	lookup func(string) (string, bool)
	fs     *flag.FlagSet
	sets   []EnvSetting
	notes  []string
	errs   []error
}

// EnvSetting is a flag value read from the environment.
type EnvSetting struct {
	Flag, Value string
	From        string // the variables it comes from, for messages
}

// ReadUpstreamEnv reads envoyproxy/ratelimit's variables through lookup:
// the flag values they give, notes on the variables read that set no
// flag (why they need none), and an error naming each variable sluice
// cannot honour. fs is the command's flag set, and may be nil.
func ReadUpstreamEnv(lookup func(string) (string, bool), fs *flag.FlagSet) ([]EnvSetting, []string, error) {
	e := &upstreamEnv{lookup: lookup, fs: fs}
	e.listeners()
	e.tls()
	e.logs()
	configFile := e.config()
	if configFile {
		e.runtime()
	}
	e.stats()
	e.cache()
	e.redis()
	e.modes()
	return e.sets, e.notes, errors.Join(e.errs...)
}

// get returns name's value when it is set and not empty.
func (e *upstreamEnv) get(name string) (string, bool) {
	v, ok := e.lookup(name)
	if !ok || v == "" {
		return "", false
	}
	return v, true
}

// getOr returns name's value, or def when it is unset or empty.
func (e *upstreamEnv) getOr(name, def string) string {
	if v, ok := e.get(name); ok {
		return v
	}
	return def
}

// anySet reports whether one of names is set.
func (e *upstreamEnv) anySet(names ...string) bool {
	for _, n := range names {
		if _, ok := e.get(n); ok {
			return true
		}
	}
	return false
}

// boolVar returns name's value as envoyproxy/ratelimit reads a bool
// (strconv.ParseBool), def when unset; a bad value is an error.
func (e *upstreamEnv) boolVar(name string, def bool) bool {
	v, ok := e.get(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.fail(name, v, "want true or false")
		return def
	}
	return b
}

// check validates name's value, when set, with parse (upstream would not
// start with a bad one either).
func (e *upstreamEnv) check(name string, parse func(string) error) {
	if v, ok := e.get(name); ok {
		if err := parse(v); err != nil {
			e.fail(name, v, err.Error())
		}
	}
}

func parseInt(s string) error {
	_, err := strconv.ParseInt(s, 10, 64)
	return err
}

func parseDuration(s string) error {
	_, err := time.ParseDuration(s)
	return err
}

func parseFloat(s string) error {
	_, err := strconv.ParseFloat(s, 64)
	return err
}

func (e *upstreamEnv) fail(name, v, why string) {
	e.errs = append(e.errs, fmt.Errorf("%s=%q: %s", name, redact.Value(name, v), why))
}

func (e *upstreamEnv) refuse(name, v, why string) {
	e.errs = append(e.errs, fmt.Errorf("%s=%q is not supported by sluice rls: %s", name, redact.Value(name, v), why))
}

func (e *upstreamEnv) set(flagName, value string, from ...string) {
	e.sets = append(e.sets, EnvSetting{Flag: flagName, Value: value, From: strings.Join(from, ", ")})
}

// note says that the set variables among names need nothing of sluice,
// and why.
func (e *upstreamEnv) note(why string, names ...string) {
	for _, n := range names {
		if _, ok := e.get(n); ok {
			e.notes = append(e.notes, n+": no effect: "+why)
		}
	}
}

// hostPort maps a HOST/PORT pair to an address flag when one is set.
func (e *upstreamEnv) hostPort(hostVar, hostDef, portVar, portDef, flagName string) {
	if !e.anySet(hostVar, portVar) {
		return
	}
	port := e.getOr(portVar, portDef)
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		e.fail(portVar, port, "want a port number")
		return
	}
	e.set(flagName, net.JoinHostPort(e.getOr(hostVar, hostDef), port), hostVar, portVar)
}

func (e *upstreamEnv) listeners() {
	e.hostPort("HOST", "0.0.0.0", "PORT", "8080", "http-listen")
	e.hostPort("GRPC_HOST", "0.0.0.0", "GRPC_PORT", "8081", "grpc-listen")
	e.hostPort("DEBUG_HOST", "0.0.0.0", "DEBUG_PORT", "6070", "debug-listen")
	if v, ok := e.get("GRPC_UDS"); ok {
		e.refuse("GRPC_UDS", v, "sluice listens on TCP only (GRPC_HOST, GRPC_PORT)")
	}
	if v, ok := e.get("GRPC_MAX_CONNECTION_AGE"); ok {
		e.set("max-connection-age", v, "GRPC_MAX_CONNECTION_AGE")
	}
	if v, ok := e.get("GRPC_MAX_CONNECTION_AGE_GRACE"); ok {
		e.set("max-connection-age-grace", v, "GRPC_MAX_CONNECTION_AGE_GRACE")
	}
}

func (e *upstreamEnv) tls() {
	tlsVars := []string{"GRPC_SERVER_TLS_CERT", "GRPC_SERVER_TLS_KEY", "GRPC_CLIENT_TLS_CACERT", "GRPC_CLIENT_TLS_SAN"}
	if e.boolVar("GRPC_SERVER_USE_TLS", false) {
		for i, f := range []string{"grpc-tls-cert", "grpc-tls-key", "grpc-tls-client-ca", "grpc-tls-client-san"} {
			v, ok := e.get(tlsVars[i])
			if !ok {
				if i < 2 {
					e.fail(tlsVars[i], "", "GRPC_SERVER_USE_TLS=true needs a certificate and its key")
				}
				continue
			}
			e.set(f, v, tlsVars[i])
		}
	} else {
		e.note("read only with GRPC_SERVER_USE_TLS=true, as envoyproxy/ratelimit does", tlsVars...)
	}
	e.note("Envoy Gateway sets it, but envoyproxy/ratelimit does not read it (its client CA is GRPC_CLIENT_TLS_CACERT), nor does sluice", "GRPC_SERVER_TLS_CA_CERT")
}

// logLevels maps logrus's level names (envoyproxy/ratelimit's) to
// --log-level's.
var logLevels = map[string]string{"trace": "debug", "debug": "debug", "info": "info", "warn": "warn", "warning": "warn",
	"error": "error", "fatal": "error", "panic": "error"}

func (e *upstreamEnv) logs() {
	if v, ok := e.get("LOG_LEVEL"); ok {
		if l, ok := logLevels[strings.ToLower(v)]; ok {
			e.set("log-level", l, "LOG_LEVEL")
		} else {
			e.fail("LOG_LEVEL", v, "want trace, debug, info, warn, warning, error, fatal or panic")
		}
	}
	if v, ok := e.get("LOG_FORMAT"); ok {
		switch f := strings.ToLower(v); f {
		case "json", "text":
			e.set("log-format", f, "LOG_FORMAT")
		default:
			e.fail("LOG_FORMAT", v, "want json or text")
		}
	}
}

var xdsVars = []string{"CONFIG_GRPC_XDS_NODE_ID", "CONFIG_GRPC_XDS_NODE_METADATA", "CONFIG_GRPC_XDS_SERVER_URL",
	"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
	"CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
	"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
	"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "XDS_CLIENT_BACKOFF_JITTER",
	"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"}

// config reads CONFIG_TYPE and reports whether rules come from files.
func (e *upstreamEnv) config() bool {
	e.boolVar("FORCE_START_WITHOUT_INITIAL_CONFIG", false)
	switch v := e.getOr("CONFIG_TYPE", "FILE"); v {
	case "FILE":
		e.note("read only with CONFIG_TYPE=GRPC_XDS_SOTW, as envoyproxy/ratelimit does", xdsVars...)
		e.note("with files the first configuration is read at start, as envoyproxy/ratelimit's file provider reads it", "FORCE_START_WITHOUT_INITIAL_CONFIG")
		return true
	case "GRPC_XDS_SOTW":
		e.xds()
		e.note("not read with CONFIG_TYPE=GRPC_XDS_SOTW, as envoyproxy/ratelimit does not", "RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY",
			"RUNTIME_APPDIRECTORY", "RUNTIME_IGNOREDOTFILES", "RUNTIME_WATCH_ROOT")
		return false
	default:
		e.fail("CONFIG_TYPE", v, "want FILE or GRPC_XDS_SOTW")
		return false
	}
}

// xds maps CONFIG_GRPC_XDS_* to --config-type xds and its flags.
func (e *upstreamEnv) xds() {
	e.set("config-type", "xds", "CONFIG_TYPE")
	e.set("xds-server", e.getOr("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"), "CONFIG_GRPC_XDS_SERVER_URL")
	if v, ok := e.get("CONFIG_GRPC_XDS_NODE_ID"); ok {
		e.set("xds-node-id", v, "CONFIG_GRPC_XDS_NODE_ID")
	}
	tlsVars := []string{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "CONFIG_GRPC_XDS_SERVER_TLS_SAN"}
	if e.boolVar("CONFIG_GRPC_XDS_SERVER_USE_TLS", false) {
		e.set("xds-tls", "true", "CONFIG_GRPC_XDS_SERVER_USE_TLS")
		for i, f := range []string{"xds-tls-cert", "xds-tls-key", "xds-tls-ca", "xds-tls-san"} {
			if v, ok := e.get(tlsVars[i]); ok {
				e.set(f, v, tlsVars[i])
			}
		}
	} else {
		e.note("read only with CONFIG_GRPC_XDS_SERVER_USE_TLS=true, as envoyproxy/ratelimit does", tlsVars...)
	}
	for i, n := range []string{"CONFIG_GRPC_XDS_NODE_METADATA", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"} {
		if v, ok := e.get(n); ok {
			e.set([]string{"xds-node-metadata", "xds-headers"}[i], v, n)
		}
	}
	e.check("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", parseDuration)
	e.check("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", parseDuration)
	e.check("XDS_CLIENT_BACKOFF_MAX_INTERVAL", parseDuration)
	e.check("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", parseFloat)
	if v, ok := e.get("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"); ok {
		e.set("xds-max-msg-size", v, "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES")
	}
	e.boolVar("XDS_CLIENT_BACKOFF_JITTER", true)
	e.note("sluice redials the management server with its own backoff", "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
		"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "XDS_CLIENT_BACKOFF_MAX_INTERVAL", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "XDS_CLIENT_BACKOFF_JITTER")
	e.note("sluice starts at once, with no rules until the first snapshot (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED keeps it not ready until then)",
		"FORCE_START_WITHOUT_INITIAL_CONFIG")
}

func (e *upstreamEnv) runtime() {
	if e.anySet("RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY") {
		dir := filepath.Join(e.getOr("RUNTIME_ROOT", "/srv/runtime_data/current"), e.getOr("RUNTIME_SUBDIRECTORY", ""),
			e.getOr("RUNTIME_APPDIRECTORY", "config"))
		e.set("config-dir", dir, "RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY")
	}
	e.boolVar("RUNTIME_IGNOREDOTFILES", false)
	e.boolVar("RUNTIME_WATCH_ROOT", true)
	e.note("sluice always skips dot files and subdirectories", "RUNTIME_IGNOREDOTFILES")
	e.note("sluice polls the files' content (--poll), which sees a changed file and a swapped symlink alike", "RUNTIME_WATCH_ROOT")
}

func (e *upstreamEnv) stats() {
	if e.boolVar("USE_DOG_STATSD", false) {
		e.refuse("USE_DOG_STATSD", e.getOr("USE_DOG_STATSD", ""), "no DogStatsD sink")
	}
	if v, ok := e.get("USE_DOG_STATSD_MOGRIFIERS"); ok {
		e.refuse("USE_DOG_STATSD_MOGRIFIERS", v, "no DogStatsD sink")
	}
	disabled := e.boolVar("DISABLE_STATS", false)
	statsdVars := []string{"STATSD_HOST", "STATSD_PORT", "EXTRA_TAGS", "STATS_FLUSH_INTERVAL"}
	e.check("STATSD_PORT", parseInt)
	e.check("STATS_FLUSH_INTERVAL", parseDuration)
	if _, ok := e.get("USE_STATSD"); ok && e.boolVar("USE_STATSD", true) && !disabled {
		// As upstream's gostats sink: TCP.
		e.set("statsd", "tcp://"+net.JoinHostPort(e.getOr("STATSD_HOST", "localhost"), e.getOr("STATSD_PORT", "8125")),
			"USE_STATSD", "STATSD_HOST", "STATSD_PORT")
		if v, ok := e.get("EXTRA_TAGS"); ok {
			e.set("statsd-tags", v, "EXTRA_TAGS")
		}
		if v, ok := e.get("STATS_FLUSH_INTERVAL"); ok {
			e.set("statsd-flush-interval", v, "STATS_FLUSH_INTERVAL")
		}
	} else {
		e.note("read only with USE_STATSD=true", statsdVars...)
	}
	if disabled {
		e.note("no statsd is sent (USE_STATSD is off); /metrics stays on the HTTP listener", "DISABLE_STATS")
	}
	if e.boolVar("USE_PROMETHEUS", false) {
		// As upstream, a listener of its own (:9090 by default), unless
		// it is the HTTP listener's port, whose /metrics is always there.
		addr := e.getOr("PROMETHEUS_ADDR", ":9090")
		if _, port, err := net.SplitHostPort(addr); err != nil {
			e.fail("PROMETHEUS_ADDR", addr, "want HOST:PORT or :PORT")
		} else if port == e.getOr("PORT", "8080") && port != "0" { // 0 is a free port, each its own
			e.note("/metrics is served on the HTTP listener, on this port", "USE_PROMETHEUS", "PROMETHEUS_ADDR")
		} else {
			e.set("metrics-listen", addr, "USE_PROMETHEUS", "PROMETHEUS_ADDR")
		}
		if v, ok := e.get("PROMETHEUS_PATH"); ok && v != "/metrics" {
			e.refuse("PROMETHEUS_PATH", v, "metrics are served on /metrics")
		}
	} else {
		e.note("read only with USE_PROMETHEUS=true, as envoyproxy/ratelimit does; /metrics is on the HTTP listener (PORT) anyway", "USE_PROMETHEUS", "PROMETHEUS_ADDR", "PROMETHEUS_PATH")
	}
	if v, ok := e.get("PROMETHEUS_MAPPER_YAML"); ok {
		if err := checkStatsdMapper(v); err != nil {
			e.refuse("PROMETHEUS_MAPPER_YAML", v, "no statsd mapper: the default mapping's names and labels are built in (--metric-labels), and a file is taken only when it is that mapping (as Envoy Gateway's statsd-exporter-config is): "+err.Error())
		} else {
			e.note("the file is upstream's default mapping, which sluice's /metrics builds in", "PROMETHEUS_MAPPER_YAML")
		}
	}
	e.boolVar("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", false)
	e.note("sluice exports no per-method response_time series", "PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS")
}

func (e *upstreamEnv) cache() {
	e.check("EXPIRATION_JITTER_MAX_SECONDS", parseInt)
	e.note("sluice's keys expire when their window ends, without jitter", "EXPIRATION_JITTER_MAX_SECONDS")
	if v, ok := e.get("LOCAL_CACHE_SIZE_IN_BYTES"); ok {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			e.fail("LOCAL_CACHE_SIZE_IN_BYTES", v, "want a size in bytes")
		} else {
			e.set("local-cache-size-bytes", v, "LOCAL_CACHE_SIZE_IN_BYTES")
		}
	}
	if v, ok := e.get("NEAR_LIMIT_RATIO"); ok {
		e.set("near-limit-ratio", v, "NEAR_LIMIT_RATIO")
	}
	if v, ok := e.get("CACHE_KEY_PREFIX"); ok {
		e.set("key-prefix", v, "CACHE_KEY_PREFIX")
	}
	if v, ok := e.get("LIMIT_RESPONSE_HEADERS_ENABLED"); ok {
		if e.boolVar("LIMIT_RESPONSE_HEADERS_ENABLED", false) {
			e.set("headers", "envoy", "LIMIT_RESPONSE_HEADERS_ENABLED")
		} else {
			e.set("headers", "off", "LIMIT_RESPONSE_HEADERS_ENABLED="+v)
		}
	}
	if e.anySet("LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER") {
		names := []string{e.getOr("LIMIT_LIMIT_HEADER", "RateLimit-Limit"), e.getOr("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
			e.getOr("LIMIT_RESET_HEADER", "RateLimit-Reset")}
		for i, n := range names {
			if strings.Contains(n, ",") {
				e.fail([]string{"LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"}[i], n, "not a header name")
				return
			}
		}
		e.set("limit-header-names", strings.Join(names, ","), "LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER")
	}
}

var perSecondVars = []string{"REDIS_PERSECOND_SOCKET_TYPE", "REDIS_PERSECOND_TYPE", "REDIS_PERSECOND_URL",
	"REDIS_PERSECOND_POOL_SIZE", "REDIS_PERSECOND_AUTH", "REDIS_PERSECOND_TLS", "REDIS_PERSECOND_SENTINEL_AUTH",
	"REDIS_PERSECOND_PIPELINE_WINDOW", "REDIS_PERSECOND_PIPELINE_LIMIT", "REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM",
	"REDIS_PERSECOND_TIMEOUT", "REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR"}

var memcacheVars = []string{"MEMCACHE_MAX_IDLE_CONNS", "MEMCACHE_SRV_REFRESH", "MEMCACHE_TLS", "MEMCACHE_TLS_CLIENT_CERT",
	"MEMCACHE_TLS_CLIENT_KEY", "MEMCACHE_TLS_CACERT", "MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION"}

func (e *upstreamEnv) redis() {
	switch v := e.getOr("BACKEND_TYPE", "redis"); v {
	case "redis":
	case "memcache":
		e.refuse("BACKEND_TYPE", v, "no memcached store: use redis (REDIS_*), or the memory store (no REDIS_* set)")
		return
	default:
		e.fail("BACKEND_TYPE", v, "want redis or memcache")
		return
	}
	for _, n := range []string{"MEMCACHE_HOST_PORT", "MEMCACHE_SRV"} {
		if v, ok := e.get(n); ok {
			e.refuse(n, v, "no memcached store")
		}
	}
	e.note("read only with BACKEND_TYPE=memcache", memcacheVars...)
	if v, ok := e.get("REDIS_PERSECOND"); ok && e.boolVar("REDIS_PERSECOND", false) {
		e.refuse("REDIS_PERSECOND", v, "one store holds every unit's counters")
	} else {
		e.note("read only with REDIS_PERSECOND=true", perSecondVars...)
	}
	e.check("REDIS_POOL_SIZE", parseInt)
	e.note("no pool: calls are pipelined on shared connections", "REDIS_POOL_SIZE")
	e.check("REDIS_PIPELINE_WINDOW", parseDuration)
	e.check("REDIS_PIPELINE_LIMIT", parseInt)
	e.check("REDIS_CLUSTER_PIPELINE_PARALLELISM", parseInt)
	e.note("sluice batches every call waiting for Redis, with no added delay", "REDIS_PIPELINE_WINDOW", "REDIS_PIPELINE_LIMIT", "REDIS_CLUSTER_PIPELINE_PARALLELISM")
	for _, n := range []string{"REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME"} {
		e.check(n, parseDuration)
	}
	e.note("sluice starts with Redis down (--on-store-error answers) and reconnects in the background, without giving up",
		"REDIS_STARTUP_INITIAL_INTERVAL", "REDIS_STARTUP_MAX_INTERVAL", "REDIS_STARTUP_MAX_ELAPSED_TIME")
	switch v := e.getOr("REDIS_POOL_ON_EMPTY_BEHAVIOR", "WAIT"); strings.ToUpper(v) {
	case "WAIT":
		e.note("no pool to wait on", "REDIS_POOL_ON_EMPTY_BEHAVIOR")
	default:
		e.refuse("REDIS_POOL_ON_EMPTY_BEHAVIOR", v, "only WAIT (envoyproxy/ratelimit refuses the others too)")
	}
	if v, ok := e.get("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION"); ok && e.boolVar("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false) {
		e.refuse("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", v, "sluice stays healthy while --on-store-error answers for Redis; /readyz and sluice_store_up say how Redis is")
	}
	if v, ok := e.get("REDIS_TIMEOUT"); ok {
		e.set("store-timeout", v, "REDIS_TIMEOUT")
	}
	if v, ok := e.get("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"); ok && e.boolVar("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false) {
		e.refuse("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", v, "sluice always verifies the server's name")
	}
	if v, ok := e.get("REDIS_SENTINEL_AUTH"); ok {
		e.refuse("REDIS_SENTINEL_AUTH", v, "sluice asks the sentinels without a password (REDIS_AUTH is the master's)")
	}
	if !e.anySet("REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_URL", "REDIS_AUTH", "REDIS_TLS") {
		e.note("read only with REDIS_TLS=true, as envoyproxy/ratelimit does", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_CACERT")
		return
	}
	e.store()
}

// store maps REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_URL, REDIS_TLS and
// REDIS_AUTH to --store and --store-password.
func (e *upstreamEnv) store() {
	from := []string{"REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_URL", "REDIS_TLS", "REDIS_AUTH"}
	socket := strings.ToLower(e.getOr("REDIS_SOCKET_TYPE", "unix"))
	typ := strings.ToLower(e.getOr("REDIS_TYPE", "SINGLE"))
	addr := e.getOr("REDIS_URL", "/var/run/nutcracker/ratelimit.sock")
	useTLS := e.boolVar("REDIS_TLS", false)
	user, password := e.redisAuth()
	userinfo := ""
	if user != "" {
		userinfo = urlUser(user) + "@"
	}
	store, ok := e.redisURL(socket, typ, addr, userinfo, useTLS)
	if !ok {
		return
	}
	if useTLS {
		// As upstream, the files are read only with REDIS_TLS.
		q, names, ok := e.redisTLSFiles()
		if !ok {
			return
		}
		from = append(from, names...)
		if len(q) > 0 {
			store += "?" + q.Encode()
		}
	} else {
		e.note("read only with REDIS_TLS=true, as envoyproxy/ratelimit does", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_CACERT")
	}
	e.set("store", store, from...)
	if password != "" {
		e.set("store-password", password, "REDIS_AUTH")
	}
}

// redisAuth splits REDIS_AUTH as upstream: USER:PASSWORD, or a password
// alone.
func (e *upstreamEnv) redisAuth() (user, password string) {
	auth, ok := e.get("REDIS_AUTH")
	if !ok {
		return "", ""
	}
	if u, p, found := strings.Cut(auth, ":"); found {
		return u, p
	}
	return "", auth
}

// redisURL is the store URL of REDIS_SOCKET_TYPE socket, REDIS_TYPE typ
// (both lower case) and REDIS_URL addr, without the TLS files; false
// when they do not fit (each failure reported).
func (e *upstreamEnv) redisURL(socket, typ, addr, userinfo string, useTLS bool) (string, bool) {
	switch {
	case socket != "tcp" && socket != "unix":
		e.fail("REDIS_SOCKET_TYPE", socket, "want tcp or unix")
		return "", false
	case typ != "single" && typ != "cluster" && typ != "sentinel":
		e.fail("REDIS_TYPE", typ, "want SINGLE, CLUSTER or SENTINEL")
		return "", false
	case strings.Contains(addr, "://"):
		e.fail("REDIS_URL", addr, "want HOST:PORT or a socket path, as envoyproxy/ratelimit (REDIS_SOCKET_TYPE, REDIS_TLS and REDIS_AUTH say the rest)")
		return "", false
	case typ == "sentinel":
		return e.sentinelURL(addr, userinfo, useTLS)
	case socket == "unix":
		if typ == "cluster" || useTLS {
			e.fail("REDIS_SOCKET_TYPE", socket, "a Unix socket serves one Redis, without TLS: want tcp with REDIS_TYPE=CLUSTER or REDIS_TLS=true")
			return "", false
		}
		return "unix://" + userinfo + addr, true
	default:
		return e.tcpURL(typ, addr, userinfo, useTLS)
	}
}

// sentinelURL is the store URL of REDIS_TYPE=SENTINEL: as upstream,
// REDIS_URL is MASTER,SENTINEL:PORT,…; the sentinels are asked without
// TLS or a password.
func (e *upstreamEnv) sentinelURL(addr, userinfo string, useTLS bool) (string, bool) {
	parts := strings.Split(addr, ",")
	for _, a := range parts[1:] {
		if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
			parts = nil
			break
		}
	}
	if len(parts) < 2 || strings.TrimSpace(parts[0]) == "" || strings.Contains(parts[0], ":") {
		e.fail("REDIS_URL", addr, "want MASTER,HOST:PORT,… with REDIS_TYPE=SENTINEL (the master set's name, then the sentinels)")
		return "", false
	}
	if useTLS {
		e.fail("REDIS_TLS", "true", "sluice asks the sentinels without TLS: REDIS_TLS=true with REDIS_TYPE=SENTINEL is not supported")
		return "", false
	}
	return "redis-sentinel://" + userinfo + strings.Join(parts[1:], ",") + "/" + strings.TrimSpace(parts[0]), true
}

// tcpURL is the store URL of one Redis (REDIS_TYPE=SINGLE) or a Cluster
// over TCP, with or without TLS.
func (e *upstreamEnv) tcpURL(typ, addr, userinfo string, useTLS bool) (string, bool) {
	for _, a := range strings.Split(addr, ",") {
		if _, _, err := net.SplitHostPort(strings.TrimSpace(a)); err != nil {
			e.fail("REDIS_URL", addr, "want HOST:PORT (a comma-separated list with REDIS_TYPE=CLUSTER)")
			return "", false
		}
	}
	scheme := "redis"
	if useTLS {
		scheme = "rediss"
	}
	if typ == "cluster" {
		scheme += "-cluster"
	} else if strings.Contains(addr, ",") {
		e.fail("REDIS_URL", addr, "one HOST:PORT with REDIS_TYPE=SINGLE")
		return "", false
	}
	return scheme + "://" + userinfo + addr, true
}

// redisTLSFiles maps REDIS_TLS_CACERT, REDIS_TLS_CLIENT_CERT and
// REDIS_TLS_CLIENT_KEY to the store URL's query, with the names of those
// set; false when a client certificate comes without its key or the
// other way round.
func (e *upstreamEnv) redisTLSFiles() (url.Values, []string, bool) {
	q := url.Values{}
	var names []string
	for _, p := range []struct{ name, param string }{{"REDIS_TLS_CACERT", "tls_ca"}, {"REDIS_TLS_CLIENT_CERT", "tls_cert"}, {"REDIS_TLS_CLIENT_KEY", "tls_key"}} {
		if v, ok := e.get(p.name); ok {
			q.Set(p.param, v)
			names = append(names, p.name)
		}
	}
	if q.Has("tls_cert") != q.Has("tls_key") {
		e.fail("REDIS_TLS_CLIENT_CERT", e.getOr("REDIS_TLS_CLIENT_CERT", ""), "REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY go together")
		return nil, nil, false
	}
	return q, names, true
}

// urlUser escapes a user name for a URL's userinfo.
func urlUser(u string) string {
	var b strings.Builder
	for _, c := range []byte(u) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func (e *upstreamEnv) modes() {
	for _, m := range []struct{ name, flag string }{
		{"SHADOW_MODE", "shadow-mode"}, {"QUOTA_MODE", "quota-mode"}, {"RESPONSE_DYNAMIC_METADATA", "response-dynamic-metadata"},
		{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "stop-increment-when-over-limit"},
		{"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "healthy-with-config"},
	} {
		if _, ok := e.get(m.name); ok {
			e.set(m.flag, strconv.FormatBool(e.boolVar(m.name, false)), m.name)
		}
	}
	if v, ok := e.get("MERGE_DOMAIN_CONFIG"); ok && e.boolVar("MERGE_DOMAIN_CONFIG", false) {
		e.refuse("MERGE_DOMAIN_CONFIG", v, "a domain in two files is refused at load")
	}
	e.tracing()
}

// tracing maps TRACING_* to --tracing and its flags, with upstream's
// defaults; the exporter's endpoint and the rest are the OTEL_* variables,
// which the exporter reads itself, as upstream's does.
func (e *upstreamEnv) tracing() {
	e.check("TRACING_SAMPLING_RATE", parseFloat)
	if !e.boolVar("TRACING_ENABLED", false) {
		e.note("read only with TRACING_ENABLED=true, as envoyproxy/ratelimit does", "TRACING_SERVICE_NAME", "TRACING_SERVICE_NAMESPACE",
			"TRACING_SERVICE_INSTANCE_ID", "TRACING_EXPORTER_PROTOCOL", "TRACING_SAMPLING_RATE")
		return
	}
	e.set("tracing", "true", "TRACING_ENABLED")
	e.set("tracing-service-name", e.getOr("TRACING_SERVICE_NAME", "RateLimit"), "TRACING_SERVICE_NAME")
	for _, m := range []struct{ name, flag string }{{"TRACING_SERVICE_NAMESPACE", "tracing-service-namespace"},
		{"TRACING_SERVICE_INSTANCE_ID", "tracing-service-instance-id"}} {
		if v, ok := e.get(m.name); ok {
			e.set(m.flag, v, m.name)
		}
	}
	switch v := e.getOr("TRACING_EXPORTER_PROTOCOL", "http"); strings.ToLower(v) {
	case "http":
		e.set("tracing-protocol", "http/protobuf", "TRACING_EXPORTER_PROTOCOL")
	case "grpc":
		e.set("tracing-protocol", "grpc", "TRACING_EXPORTER_PROTOCOL")
	default:
		e.fail("TRACING_EXPORTER_PROTOCOL", v, "want http or grpc")
	}
	// As upstream's ratio sampler: 1 and above sample every trace, 0 and
	// below none.
	if r, err := strconv.ParseFloat(e.getOr("TRACING_SAMPLING_RATE", "1"), 64); err == nil {
		e.set("tracing-sampling-rate", strconv.FormatFloat(min(max(r, 0), 1), 'g', -1, 64), "TRACING_SAMPLING_RATE")
	}
}

// metricsServer serves GET /metrics of srv on ln, for --metrics-listen
// (envoyproxy/ratelimit's PROMETHEUS_ADDR), or returns nil without ln.
func metricsServer(srv *rls.Server, ln net.Listener) *http.Server {
	if ln == nil {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", srv.Handler())
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second,
		IdleTimeout: 75 * time.Second, MaxHeaderBytes: 16 << 10, ErrorLog: srv.ErrorLog("metrics-listen")}
}
