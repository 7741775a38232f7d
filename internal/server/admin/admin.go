package admin

import (
	"net/http"
	"net/http/pprof"
)

// Pprof returns a handler serving net/http/pprof's profiles under
// /debug/pprof/ (index, cmdline, profile, symbol, trace and the named
// profiles). Serve it on a loopback or otherwise private listener only: a
// profile shows what the process does and costs CPU while it runs.
func Pprof() http.Handler {
	mux := http.NewServeMux()
	Register(mux)
	return mux
}

// Register adds the /debug/pprof/ handlers to mux.
func Register(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
