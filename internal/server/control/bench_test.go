package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/ratelimit"
)

// Adjust runs for every limited check of every request.
func BenchmarkAdjust(b *testing.B) {
	key := "sl:token_bucket:60000ms:sluice_remote%5Faddress_203.0.113.7_"
	for _, tc := range []struct {
		name string
		set  func(*control.Control)
	}{
		{"nothing-set", func(*control.Control) {}},
		{"override-and-percent", func(c *control.Control) {
			ctx := context.Background()
			c.SetOverride(ctx, control.Override{Rule: "per-ip", Who: control.Who(key), Limit: ratelimit.PerMinute(100), Until: time.Now().Add(time.Hour)})
			c.SetEnforce(ctx, "per-ip", 10)
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := control.New(context.Background(), control.Options{})
			defer c.Close()
			tc.set(c)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					lim, shadow := ratelimit.PerMinute(5), false
					c.Adjust("per-ip", key, &lim, &shadow)
				}
			})
		})
	}
}
