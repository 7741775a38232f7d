package runner

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// upstreamSettings are the envconfig names of envoyproxy/ratelimit's
// src/settings/settings.go at f2fb15770f7f (master, July 2026), in order.
var upstreamSettings = strings.Fields(`HOST PORT DEBUG_HOST DEBUG_PORT GRPC_UDS GRPC_HOST GRPC_PORT GRPC_MAX_CONNECTION_AGE
GRPC_MAX_CONNECTION_AGE_GRACE GRPC_SERVER_USE_TLS GRPC_SERVER_TLS_CERT GRPC_SERVER_TLS_KEY
GRPC_CLIENT_TLS_CACERT GRPC_CLIENT_TLS_SAN LOG_LEVEL LOG_FORMAT CONFIG_TYPE
FORCE_START_WITHOUT_INITIAL_CONFIG CONFIG_GRPC_XDS_NODE_ID CONFIG_GRPC_XDS_NODE_METADATA
CONFIG_GRPC_XDS_SERVER_URL CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL
CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS CONFIG_GRPC_XDS_SERVER_USE_TLS CONFIG_GRPC_XDS_CLIENT_TLS_CERT
CONFIG_GRPC_XDS_CLIENT_TLS_KEY CONFIG_GRPC_XDS_SERVER_TLS_CACERT CONFIG_GRPC_XDS_SERVER_TLS_SAN
XDS_CLIENT_BACKOFF_INITIAL_INTERVAL XDS_CLIENT_BACKOFF_MAX_INTERVAL XDS_CLIENT_BACKOFF_RANDOM_FACTOR
XDS_CLIENT_BACKOFF_JITTER XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES USE_DOG_STATSD USE_DOG_STATSD_MOGRIFIERS
USE_STATSD STATSD_HOST STATSD_PORT EXTRA_TAGS STATS_FLUSH_INTERVAL DISABLE_STATS USE_PROMETHEUS
PROMETHEUS_ADDR PROMETHEUS_PATH PROMETHEUS_MAPPER_YAML PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS RUNTIME_ROOT
RUNTIME_SUBDIRECTORY RUNTIME_APPDIRECTORY RUNTIME_IGNOREDOTFILES RUNTIME_WATCH_ROOT
EXPIRATION_JITTER_MAX_SECONDS LOCAL_CACHE_SIZE_IN_BYTES NEAR_LIMIT_RATIO CACHE_KEY_PREFIX BACKEND_TYPE
STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT LIMIT_RESPONSE_HEADERS_ENABLED LIMIT_LIMIT_HEADER
LIMIT_REMAINING_HEADER LIMIT_RESET_HEADER HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED REDIS_SOCKET_TYPE
REDIS_TYPE REDIS_URL REDIS_POOL_SIZE REDIS_AUTH REDIS_TLS REDIS_TLS_CLIENT_CERT REDIS_TLS_CLIENT_KEY
REDIS_TLS_CACERT REDIS_TLS_SKIP_HOSTNAME_VERIFICATION REDIS_PIPELINE_WINDOW REDIS_PIPELINE_LIMIT
REDIS_CLUSTER_PIPELINE_PARALLELISM REDIS_PERSECOND REDIS_PERSECOND_SOCKET_TYPE REDIS_PERSECOND_TYPE
REDIS_PERSECOND_URL REDIS_PERSECOND_POOL_SIZE REDIS_PERSECOND_AUTH REDIS_PERSECOND_TLS REDIS_SENTINEL_AUTH
REDIS_PERSECOND_SENTINEL_AUTH REDIS_PERSECOND_PIPELINE_WINDOW REDIS_PERSECOND_PIPELINE_LIMIT
REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM REDIS_HEALTH_CHECK_ACTIVE_CONNECTION REDIS_TIMEOUT
REDIS_PERSECOND_TIMEOUT REDIS_POOL_ON_EMPTY_BEHAVIOR REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR
REDIS_STARTUP_INITIAL_INTERVAL REDIS_STARTUP_MAX_INTERVAL REDIS_STARTUP_MAX_ELAPSED_TIME MEMCACHE_HOST_PORT
MEMCACHE_MAX_IDLE_CONNS MEMCACHE_SRV MEMCACHE_SRV_REFRESH MEMCACHE_TLS MEMCACHE_TLS_CLIENT_CERT
MEMCACHE_TLS_CLIENT_KEY MEMCACHE_TLS_CACERT MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION SHADOW_MODE QUOTA_MODE
RESPONSE_DYNAMIC_METADATA MERGE_DOMAIN_CONFIG TRACING_ENABLED TRACING_SERVICE_NAME TRACING_SERVICE_NAMESPACE
TRACING_SERVICE_INSTANCE_ID TRACING_EXPORTER_PROTOCOL TRACING_SAMPLING_RATE`)

// TestUpstreamVarsTable: the table names every variable of upstream's
// settings.go once, in its order (and Envoy Gateway's
// GRPC_SERVER_TLS_CA_CERT), and says what sluice does with each (that
// every flag it maps to exists is cmd/sluice's TestUpstreamVarsFlags).
func TestUpstreamVarsTable(t *testing.T) {
	var names []string
	seen := map[string]bool{}
	for _, v := range upstreamVars {
		if seen[v.name] {
			t.Errorf("%s twice in the table", v.name)
		}
		seen[v.name] = true
		if v.name != "GRPC_SERVER_TLS_CA_CERT" {
			names = append(names, v.name)
		}
		switch v.how {
		case "same", "mapped":
			if len(v.flags) == 0 {
				t.Errorf("%s is %s but names no flag", v.name, v.how)
			}
		case "no effect", "refused":
			if v.note == "" {
				t.Errorf("%s is %s but says not why", v.name, v.how)
			}
		default:
			t.Errorf("%s: unknown disposition %q", v.name, v.how)
		}
	}
	if !slices.Equal(names, upstreamSettings) {
		t.Errorf("the table's variables differ from upstream's settings.go:\n got %q\nwant %q", names, upstreamSettings)
	}
}

// upstreamProbe is, for each variable, a value that asks for something
// (and the variables it needs beside it), for TestEveryUpstreamVarIsRead.
var upstreamProbe = map[string]map[string]string{
	"GRPC_SERVER_TLS_CERT":                      {"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_KEY": "/k"},
	"GRPC_SERVER_TLS_KEY":                       {"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c"},
	"GRPC_CLIENT_TLS_CACERT":                    {"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k"},
	"GRPC_CLIENT_TLS_SAN":                       {"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k"},
	"STATSD_HOST":                               {"USE_STATSD": "true"},
	"STATSD_PORT":                               {"USE_STATSD": "true"},
	"EXTRA_TAGS":                                {"USE_STATSD": "true"},
	"STATS_FLUSH_INTERVAL":                      {"USE_STATSD": "true"},
	"REDIS_TLS":                                 {"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379"},
	"REDIS_TYPE":                                {"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379"},
	"REDIS_SOCKET_TYPE":                         {"REDIS_URL": "redis:6379"},
	"REDIS_TLS_CLIENT_CERT":                     {"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "REDIS_TLS": "true", "REDIS_TLS_CLIENT_KEY": "/k"},
	"REDIS_TLS_CLIENT_KEY":                      {"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "REDIS_TLS": "true", "REDIS_TLS_CLIENT_CERT": "/c"},
	"REDIS_TLS_CACERT":                          {"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "REDIS_TLS": "true"},
	"CONFIG_GRPC_XDS_NODE_METADATA":             {"CONFIG_TYPE": "GRPC_XDS_SOTW"},
	"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": {"CONFIG_TYPE": "GRPC_XDS_SOTW"},
	"CONFIG_GRPC_XDS_SERVER_TLS_SAN":            {"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true"},
}

// probeValue is a value of v that asks for something.
func probeValue(v upstreamVar) string {
	switch v.name {
	case "CONFIG_TYPE":
		return "GRPC_XDS_SOTW"
	case "BACKEND_TYPE":
		return "memcache"
	case "PROMETHEUS_PATH":
		return "/stats"
	case "REDIS_POOL_ON_EMPTY_BEHAVIOR":
		return "ERROR"
	case "REDIS_TYPE":
		return "CLUSTER"
	case "REDIS_SOCKET_TYPE":
		return "tcp"
	case "REDIS_URL":
		return "/run/redis.sock"
	case "GRPC_SERVER_USE_TLS":
		return "false" // with no certificate: read, and says the others are not
	case "STATSD_PORT", "PORT", "GRPC_PORT", "DEBUG_PORT":
		return "9125"
	case "LOG_LEVEL":
		return "debug"
	case "LOG_FORMAT":
		return "json"
	case "LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER":
		return "X-" + v.name
	}
	switch v.def {
	case "false", "true":
		return "true"
	case "":
		return "x"
	}
	return v.def
}

// TestEveryUpstreamVarIsRead: each variable, set to a value that asks for
// something, sets a flag, is noted as needing none (and why), or is an
// error naming it: none is silently ignored.
func TestEveryUpstreamVarIsRead(t *testing.T) {
	for _, v := range upstreamVars {
		env := map[string]string{v.name: probeValue(v)}
		if v.name == "GRPC_SERVER_USE_TLS" {
			env["GRPC_SERVER_TLS_CERT"] = "/c" // read only with TLS on: noted
		}
		for k, x := range upstreamProbe[v.name] {
			env[k] = x
		}
		sets, notes, err := ReadUpstreamEnv(mapLookup(env), flag.NewFlagSet("t", flag.ContinueOnError))
		var said []string
		for _, s := range sets {
			said = append(said, s.From)
		}
		said = append(said, notes...)
		if err != nil {
			said = append(said, err.Error())
		}
		found := false
		for _, s := range said {
			if regexp.MustCompile(`\b` + v.name + `\b`).MatchString(s) {
				found = true
			}
		}
		if !found && !(v.name == "GRPC_SERVER_USE_TLS" && strings.Contains(strings.Join(notes, "\n"), "GRPC_SERVER_USE_TLS=true")) {
			t.Errorf("%s=%q: not named by any setting, note or error: %q", v.name, env[v.name], said)
		}
		if v.how == "refused" && err == nil && !strings.Contains(v.note, "unless") {
			t.Errorf("%s=%q (%s) was not refused", v.name, env[v.name], v.note)
		}
	}
}

func mapLookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// settingsOf returns flag=value lines for sets, sorted.
func settingsOf(sets []EnvSetting) []string {
	var out []string
	for _, s := range sets {
		out = append(out, "--"+s.Flag+"="+s.Value)
	}
	sort.Strings(out)
	return out
}

func TestUpstreamEnvMapping(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"none", nil, nil},
		{"runtime layout with defaults", map[string]string{"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit"},
			[]string{"--config-dir=/data/ratelimit/config"}},
		{"runtime app directory", map[string]string{"RUNTIME_SUBDIRECTORY": "rl", "RUNTIME_APPDIRECTORY": "rules"},
			[]string{"--config-dir=/srv/runtime_data/current/rl/rules"}},
		{"ports", map[string]string{"PORT": "9080", "GRPC_HOST": "127.0.0.1", "DEBUG_PORT": "6070"},
			[]string{"--debug-listen=0.0.0.0:6070", "--grpc-listen=127.0.0.1:8081", "--http-listen=0.0.0.0:9080"}},
		{"redis single tcp with user and password", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis.redis.svc:6379", "REDIS_AUTH": "app:s3cr:et"},
			[]string{"--store-password=s3cr:et", "--store=redis://app@redis.redis.svc:6379"}},
		{"redis password only, TLS", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6380", "REDIS_AUTH": "pw", "REDIS_TLS": "true"},
			[]string{"--store-password=pw", "--store=rediss://r:6380"}},
		{"redis unix socket by default", map[string]string{"REDIS_URL": "/run/redis.sock"},
			[]string{"--store=unix:///run/redis.sock"}},
		{"redis cluster", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "cluster", "REDIS_URL": "a:1,b:2"},
			[]string{"--store=redis-cluster://a:1,b:2"}},
		{"redis sentinel", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "SENTINEL", "REDIS_URL": "mymaster,s1:26379,s2:26379", "REDIS_AUTH": "pw"},
			[]string{"--store-password=pw", "--store=redis-sentinel://s1:26379,s2:26379/mymaster"}},
		{"redis tls files", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6380", "REDIS_TLS": "true", "REDIS_TLS_CACERT": "/etc/redis/ca.crt",
			"REDIS_TLS_CLIENT_CERT": "/etc/redis/c.crt", "REDIS_TLS_CLIENT_KEY": "/etc/redis/c.key"},
			[]string{"--store=rediss://r:6380?tls_ca=%2Fetc%2Fredis%2Fca.crt&tls_cert=%2Fetc%2Fredis%2Fc.crt&tls_key=%2Fetc%2Fredis%2Fc.key"}},
		{"redis tls files without REDIS_TLS", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6379", "REDIS_TLS_CACERT": "/ca"},
			[]string{"--store=redis://r:6379"}},
		{"modes and limits", map[string]string{"SHADOW_MODE": "true", "QUOTA_MODE": "false", "NEAR_LIMIT_RATIO": "0.9", "CACHE_KEY_PREFIX": "rl_",
			"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "1", "RESPONSE_DYNAMIC_METADATA": "T", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED": "true",
			"REDIS_TIMEOUT": "250ms", "LOCAL_CACHE_SIZE_IN_BYTES": "1048576"},
			[]string{"--healthy-with-config=true", "--key-prefix=rl_", "--local-cache-size-bytes=1048576", "--near-limit-ratio=0.9", "--quota-mode=false",
				"--response-dynamic-metadata=true", "--shadow-mode=true", "--stop-increment-when-over-limit=true", "--store-timeout=250ms"}},
		{"headers", map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_RESET_HEADER": "X-Reset"},
			[]string{"--headers=envoy", "--limit-header-names=RateLimit-Limit,RateLimit-Remaining,X-Reset"}},
		{"logs", map[string]string{"LOG_LEVEL": "WARNING", "LOG_FORMAT": "JSON"}, []string{"--log-format=json", "--log-level=warn"}},
		{"trace is debug", map[string]string{"LOG_LEVEL": "trace"}, []string{"--log-level=debug"}},
		{"tls and mtls", map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/certs/tls.crt", "GRPC_SERVER_TLS_KEY": "/certs/tls.key",
			"GRPC_CLIENT_TLS_CACERT": "/certs/ca.crt", "GRPC_CLIENT_TLS_SAN": "envoy"},
			[]string{"--grpc-tls-cert=/certs/tls.crt", "--grpc-tls-client-ca=/certs/ca.crt", "--grpc-tls-client-san=envoy", "--grpc-tls-key=/certs/tls.key"}},
		{"tls off: files not read", map[string]string{"GRPC_SERVER_TLS_CERT": "/certs/tls.crt"}, nil},
		{"connection age", map[string]string{"GRPC_MAX_CONNECTION_AGE": "1h", "GRPC_MAX_CONNECTION_AGE_GRACE": "30s"},
			[]string{"--max-connection-age-grace=30s", "--max-connection-age=1h"}},
		{"statsd as Envoy Gateway sets it", map[string]string{"USE_STATSD": "true", "STATSD_PORT": "9125", "EXTRA_TAGS": "a:b", "STATS_FLUSH_INTERVAL": "5s"},
			[]string{"--statsd-flush-interval=5s", "--statsd-tags=a:b", "--statsd=tcp://localhost:9125"}},
		{"statsd off", map[string]string{"USE_STATSD": "false", "STATSD_PORT": "9125"}, nil},
		{"stats disabled", map[string]string{"USE_STATSD": "true", "DISABLE_STATS": "true"}, nil},
		{"prometheus on the HTTP port", map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": ":8080", "PROMETHEUS_PATH": "/metrics"}, nil},
		{"prometheus by default", map[string]string{"USE_PROMETHEUS": "true"}, []string{"--metrics-listen=:9090"}},
		{"prometheus address", map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "127.0.0.1:19001"}, []string{"--metrics-listen=127.0.0.1:19001"}},
		{"prometheus off", map[string]string{"PROMETHEUS_ADDR": ":19001", "PROMETHEUS_PATH": "/stats"}, nil},
		{"empty is unset", map[string]string{"REDIS_URL": "", "PORT": ""}, nil},
		{"xds as Envoy Gateway sets it", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": "envoy-gateway:18001",
			"CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/certs/tls.crt",
			"CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/certs/tls.key", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/certs/ca.crt", "RUNTIME_ROOT": "/data",
			"FORCE_START_WITHOUT_INITIAL_CONFIG": "true"},
			[]string{"--config-type=xds", "--xds-node-id=envoy-ratelimit", "--xds-server=envoy-gateway:18001", "--xds-tls-ca=/certs/ca.crt",
				"--xds-tls-cert=/certs/tls.crt", "--xds-tls-key=/certs/tls.key", "--xds-tls=true"}},
		{"xds defaults", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW"}, []string{"--config-type=xds", "--xds-server=localhost:18000"}},
		{"tracing as Envoy Gateway sets it", map[string]string{"TRACING_ENABLED": "true", "TRACING_SERVICE_NAME": "envoy-ratelimit",
			"TRACING_SERVICE_NAMESPACE": "envoy-gateway-system", "TRACING_SERVICE_INSTANCE_ID": "envoy-ratelimit-6d4f-x", "TRACING_SAMPLING_RATE": "1.0",
			"OTEL_EXPORTER_OTLP_ENDPOINT": "http://trace-collector.envoy-gateway-system.svc.cluster.local:4318"},
			[]string{"--tracing-protocol=http/protobuf", "--tracing-sampling-rate=1", "--tracing-service-instance-id=envoy-ratelimit-6d4f-x",
				"--tracing-service-name=envoy-ratelimit", "--tracing-service-namespace=envoy-gateway-system", "--tracing=true"}},
		{"tracing defaults", map[string]string{"TRACING_ENABLED": "true", "TRACING_EXPORTER_PROTOCOL": "grpc", "TRACING_SAMPLING_RATE": "5"},
			[]string{"--tracing-protocol=grpc", "--tracing-sampling-rate=1", "--tracing-service-name=RateLimit", "--tracing=true"}},
		{"tracing off", map[string]string{"TRACING_ENABLED": "false", "TRACING_SERVICE_NAME": "x"}, nil},
		{"xds node metadata, headers and SAN", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_NODE_METADATA": "a=1,b=x=y",
			"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "authorization:Bearer t", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true",
			"CONFIG_GRPC_XDS_SERVER_TLS_SAN": "xds.internal"},
			[]string{"--config-type=xds", "--xds-headers=authorization:Bearer t", "--xds-node-metadata=a=1,b=x=y", "--xds-server=localhost:18000",
				"--xds-tls-san=xds.internal", "--xds-tls=true"}},
		{"xds SAN without TLS: not read", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_TLS_SAN": "xds.internal"},
			[]string{"--config-type=xds", "--xds-server=localhost:18000"}},
	} {
		sets, _, err := ReadUpstreamEnv(mapLookup(tc.env), nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := settingsOf(sets); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestUpstreamEnvRefused: what sluice does not do stops it, naming the
// variable; bad values are errors naming theirs; a password is never in
// a message.
func TestUpstreamEnvRefused(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"BACKEND_TYPE": "memcache"}, `BACKEND_TYPE="memcache" is not supported`},
		{map[string]string{"MEMCACHE_HOST_PORT": "m:11211"}, `MEMCACHE_HOST_PORT="m:11211" is not supported`},
		{map[string]string{"USE_DOG_STATSD": "true"}, `USE_DOG_STATSD="true" is not supported`},
		{map[string]string{"TRACING_ENABLED": "true", "TRACING_EXPORTER_PROTOCOL": "zipkin"}, `TRACING_EXPORTER_PROTOCOL="zipkin": want http or grpc`},
		{map[string]string{"TRACING_ENABLED": "yes"}, `TRACING_ENABLED="yes": want true or false`},
		{map[string]string{"GRPC_UDS": "/tmp/rl.sock"}, `GRPC_UDS="/tmp/rl.sock" is not supported`},
		{map[string]string{"MERGE_DOMAIN_CONFIG": "true"}, `MERGE_DOMAIN_CONFIG="true" is not supported`},
		{map[string]string{"REDIS_PERSECOND": "true"}, `REDIS_PERSECOND="true" is not supported`},
		{map[string]string{"REDIS_TYPE": "SENTINEL", "REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "s1:26379,s2:26379"}, `REDIS_URL="s1:26379,s2:26379": want MASTER,HOST:PORT`},
		{map[string]string{"REDIS_SENTINEL_AUTH": "x"}, `REDIS_SENTINEL_AUTH="xxxxx" is not supported`},
		{map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:1", "REDIS_TLS": "true", "REDIS_TLS_CLIENT_CERT": "/c"}, `REDIS_TLS_CLIENT_KEY go together`},
		{map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_PATH": "/stats"}, `PROMETHEUS_PATH="/stats" is not supported`},
		{map[string]string{"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "9090"}, `PROMETHEUS_ADDR="9090": want HOST:PORT`},
		{map[string]string{"PROMETHEUS_MAPPER_YAML": "/m.yaml"}, `PROMETHEUS_MAPPER_YAML="/m.yaml" is not supported`},
		{map[string]string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION": "true"}, `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION="true" is not supported`},
		{map[string]string{"REDIS_POOL_ON_EMPTY_BEHAVIOR": "ERROR"}, `REDIS_POOL_ON_EMPTY_BEHAVIOR="ERROR" is not supported`},
		{map[string]string{"SHADOW_MODE": "yes"}, `SHADOW_MODE="yes": want true or false`},
		{map[string]string{"PORT": "http"}, `PORT="http": want a port number`},
		{map[string]string{"LOG_LEVEL": "loud"}, `LOG_LEVEL="loud": want trace`},
		{map[string]string{"LOG_FORMAT": "xml"}, `LOG_FORMAT="xml": want json or text`},
		{map[string]string{"REDIS_SOCKET_TYPE": "udp", "REDIS_URL": "r:1"}, `REDIS_SOCKET_TYPE="udp": want tcp or unix`},
		{map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis"}, `REDIS_URL="redis": want HOST:PORT`},
		{map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "a:1,b:2"}, `REDIS_URL="a:1,b:2": one HOST:PORT with REDIS_TYPE=SINGLE`},
		{map[string]string{"REDIS_URL": "/s", "REDIS_TLS": "true", "REDIS_AUTH": "hunter2"}, `REDIS_SOCKET_TYPE="unix": a Unix socket`},
		{map[string]string{"GRPC_SERVER_USE_TLS": "true"}, `GRPC_SERVER_TLS_CERT="": GRPC_SERVER_USE_TLS=true needs a certificate`},
		{map[string]string{"REDIS_POOL_SIZE": "ten"}, `REDIS_POOL_SIZE="ten"`},
		{map[string]string{"CONFIG_TYPE": "GRPC_XDS_DELTA"}, `CONFIG_TYPE="GRPC_XDS_DELTA": want FILE or GRPC_XDS_SOTW`},
	} {
		_, _, err := ReadUpstreamEnv(mapLookup(tc.env), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.env, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: the error shows the password: %v", tc.env, err)
		}
	}
}

// FuzzUpstreamEnv: any values of the variables that combine are read
// without a panic, and every flag value read is one sluice rls's flags
// take or an error names a variable.
func FuzzUpstreamEnv(f *testing.F) {
	f.Add("tcp", "SINGLE", "redis:6379", "user:pw", "true", "/data", "8080")
	f.Add("unix", "CLUSTER", "a:1,b:2", "", "false", "", "x")
	f.Add("", "sentinel", "m,s:1", ":", "1", "..", "65536")
	f.Add("TCP", "single", "[::1]:6379", "a@b:c/d", "T", "/a b", "0")
	f.Fuzz(func(t *testing.T, socket, typ, url, auth, tls, root, port string) {
		env := map[string]string{"REDIS_SOCKET_TYPE": socket, "REDIS_TYPE": typ, "REDIS_URL": url, "REDIS_AUTH": auth,
			"REDIS_TLS": tls, "RUNTIME_ROOT": root, "PORT": port, "LIMIT_LIMIT_HEADER": url}
		sets, _, err := ReadUpstreamEnv(mapLookup(env), nil)
		if err != nil {
			return
		}
		for _, s := range sets {
			if s.Flag == "store" {
				p := StorePassword{password: "pw"}
				if _, err := p.Apply(s.Value); err != nil && !strings.Contains(err.Error(), "has a password already") {
					t.Errorf("store %q from %v: %v", s.Value, env, err)
				}
			}
		}
	})
}

// TestDeployDocTable: docs/deploy.md's table has a row for every variable,
// with what sluice rls does with it.
func TestDeployDocTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range upstreamVars {
		re := regexp.MustCompile("(?m)^\\| `" + v.name + "` \\| [^|]+ \\| " + regexp.QuoteMeta(v.how) + " \\|")
		if !re.Match(doc) {
			t.Errorf("docs/deploy.md has no row for %s as %s", v.name, v.how)
		}
	}
}
