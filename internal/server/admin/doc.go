// Package admin holds what both servers' admin listeners serve the same
// way: Go's profiles under /debug/pprof/.
package admin
