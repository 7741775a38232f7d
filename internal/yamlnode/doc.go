// Package yamlnode holds what sluice's two YAML decoders (the rules files
// of package rules and the gateway's config) share about yaml.v3's node
// trees: how a node is named in a problem, how a field's path is written,
// and which line yaml.v3's own errors point to.
//
// The decoders themselves stay in their packages: they differ where their
// formats do (envoyproxy/ratelimit's YAML 1.1 booleans and merge keys in
// the rules, Go durations in the gateway's config).
package yamlnode
