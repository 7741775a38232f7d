// Package bench holds side-by-side benchmarks of sluice against the
// libraries and servers people would pick instead. It is its own module so
// that the peers never enter the module graph of sluice's users. Each
// subpackage covers one area; docs/benchmarks.md has the commands and the
// figures.
package bench
