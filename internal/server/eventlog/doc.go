// Package eventlog turns a flood of events into a bounded number of log
// lines, so that an outage does not become a logging outage too.
//
// A rate limiter sees the same thing happen many times a second: a store
// that fails fails for every request, and a limit that denies denies every
// request of a flood. One log line per event writes as many lines a second
// as the service answers requests. A Log counts events instead, per kind
// (StoreError, ShadowDenied, Denied, Unauthorized, UpstreamError,
// ServerError) and rule, and writes one line per
// (kind, rule) per interval (10 s by default) with the count, a few sample
// keys and the last error:
//
//	level=ERROR msg="store failed" kind=store_error rule=api count=19873 keys="[10.0.0.7 10.0.0.9 10.0.0.12]" error="dial tcp 10.0.1.5:6379: connect: connection refused" interval=10s
//
// The first event of a (kind, rule) that had none in the last interval is
// logged at once (with first=true), so the start of an outage shows
// without waiting for the interval; the summaries that follow count the
// events after it. Each event is in exactly one line.
//
// Bounds: at most Options.MaxRules (kind, rule) pairs are tracked at once;
// the events of further pairs are counted in one line per kind with
// overflow=true. A pair is forgotten after an interval without events.
// Rule names and keys are cut to MaxKeyLen bytes (and marked, CutMarker),
// errors to MaxErrLen, and a line keeps at most Options.Samples keys. So
// an interval has at most one summary per tracked pair, MaxRules first
// lines and one overflow line per kind: 2·MaxRules+6 lines whatever the
// request rate, each of bounded length, in bounded memory. Cut is the one
// helper that bounds a client-controlled value anywhere else in a line.
//
// Report is the hot path: once its pair is tracked and the interval's
// samples are taken, it takes no lock and does not allocate (one map
// lookup and one atomic add). A Log owns one goroutine, which writes the
// summaries; Close stops it and writes what is left.
package eventlog
