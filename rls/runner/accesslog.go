package runner

import (
	"flag"
	"fmt"
	"io"

	"github.com/sluicehq/sluice/internal/server/accesslog"
)

// rlsAccessLogFlags are --access-log and its bounds: a JSON line per
// limited descriptor (internal/server/accesslog), off without a path.
type rlsAccessLogFlags struct {
	path, identity, keyFile string
	sample                  float64
	rate                    int
	refusalsOnly            bool
}

func (a *rlsAccessLogFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&a.path, "access-log", "", "`PATH` of the access log, a JSON line per limited descriptor (- for standard error); empty (the default): none")
	fs.Float64Var(&a.sample, "access-log-sample", 1, "fraction of the decisions the access log keeps, above 0 to 1")
	fs.IntVar(&a.rate, "access-log-rate", accesslog.DefaultMaxPerSecond, "most access log lines a second; the rest are dropped and counted (sluice_rls_access_log_dropped_total)")
	fs.StringVar(&a.identity, "access-log-identity", "hashed", "how the access log names the caller (the store key): hashed (HMAC under --access-log-key-file's key, else a per-process one; the same caller the same in every line), clear or none")
	fs.StringVar(&a.keyFile, "access-log-key-file", "", "`FILE` whose first line (16 bytes at least) is the HMAC key of hashed identities, in the access log and the spans (--tracing-identity hashed): the same caller the same hash across restarts and instances; empty: a key drawn at start")
	fs.BoolVar(&a.refusalsOnly, "access-log-refusals-only", false, "leave allowed decisions out of the access log")
}

// check refuses the flags out of their range.
func (a *rlsAccessLogFlags) check() error {
	if !(a.sample > 0 && a.sample <= 1) {
		return fmt.Errorf("%w: --access-log-sample %v: want a number above 0 to 1", ErrUsage, a.sample)
	}
	if a.rate < 1 || a.rate > 1_000_000 {
		return fmt.Errorf("%w: --access-log-rate %d: want 1 to 1000000", ErrUsage, a.rate)
	}
	if _, err := accesslog.ParseIdentity(a.identity); err != nil {
		return fmt.Errorf("%w: --access-log-identity: %v", ErrUsage, err)
	}
	return nil
}

// open starts the access log, or returns nils without --access-log.
func (a *rlsAccessLogFlags) open() (*accesslog.Log, io.Closer, error) {
	if a.path == "" {
		return nil, nil, nil
	}
	w, err := accesslog.Open(a.path)
	if err != nil {
		return nil, nil, fmt.Errorf("rls: %w", err)
	}
	id, _ := accesslog.ParseIdentity(a.identity) // checked
	key, err := accesslog.LoadKey(a.keyFile)
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("rls: %w", err)
	}
	l, err := accesslog.New(accesslog.Options{Writer: w, Server: "rls", Sample: a.sample, MaxPerSecond: a.rate,
		Identity: id, RefusalsOnly: a.refusalsOnly, Key: key})
	if err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("rls: %w", err)
	}
	return l, w, nil
}
