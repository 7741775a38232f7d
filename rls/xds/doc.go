// Package xds takes `sluice rls`'s rule set from an xDS management server,
// as envoyproxy/ratelimit does with CONFIG_TYPE=GRPC_XDS_SOTW and as Envoy
// Gateway serves it: one aggregated (ADS) state-of-the-world stream
// subscribed to every resource of type
// type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig.
//
// Resources are read at envoyproxy/ratelimit master's schema
// (api/ratelimit/config/ratelimit/v3/rls_conf.proto, July 2026, through
// the go-control-plane/ratelimit version upstream itself builds with), so
// a descriptor's quota_mode (field 7) and metadata (field 8) are kept.
// The node carries Options.NodeMetadata, each stream Options.Headers as
// gRPC metadata, as upstream sends CONFIG_GRPC_XDS_NODE_METADATA and
// CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS.
//
// Each response holds every RateLimitConfig the server has for the node.
// The client turns each into the same YAML envoyproxy/ratelimit's loader
// reads (domain, descriptors, rate_limit, shadow_mode, detailed_metric,
// quota_mode, metadata, replaces), parses it with package rules, builds one rules.Set of them
// all and swaps it in: a config the server no longer sends is withdrawn
// with it. A response that does not decode or validate (a bad unit, a
// duplicate domain, an unknown resource type) is refused with a NACK
// carrying every problem, and the last good set stays in use. The stream
// is opened again after a failure, with exponential backoff and jitter,
// and asks for the version last accepted.
package xds
