// Package didyoumean finds the known name closest to a misspelt one, for
// the "unknown field" messages of sluice's config parsers (rules and
// gateway).
package didyoumean
