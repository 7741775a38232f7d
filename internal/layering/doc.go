// Package layering has no code: its tests hold the repository to DESIGN.md's
// rules on imports (the core uses only the standard library; imports point
// down the layer list) and keep the README's Go snippets honest.
package layering
