package eventlog_test

import (
	"errors"
	"log/slog"
	"os"

	"github.com/sluicehq/sluice/internal/server/eventlog"
)

// A store outage reported 1000 times gives two lines: the first failure at
// once, then one summary of the rest (here written by Close; a running Log
// writes it at the end of the interval).
func Example() {
	// No time in the output, to keep it stable.
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	events := eventlog.New(logger, eventlog.Options{})
	defer events.Close()

	down := errors.New("redis: connection refused")
	for i := range 1000 {
		key := []string{"alice", "bob", "carol", "dave"}[i%4]
		events.Report(eventlog.StoreError, "api_per_user", key, down)
	}
	events.Report(eventlog.Denied, "login", "10.0.0.7", nil)
	// Output:
	// level=ERROR msg="store failed" kind=store_error rule=api_per_user count=1 keys=[alice] error="redis: connection refused" first=true
	// level=INFO msg="over limit" kind=denied rule=login count=1 keys=[10.0.0.7] first=true
	// level=ERROR msg="store failed" kind=store_error rule=api_per_user count=999 keys="[bob carol dave]" error="redis: connection refused" interval=10s
}
