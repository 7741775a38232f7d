package control_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/ratelimit"
)

// Give one caller ten times its limit for an hour, and roll a rule out to
// a tenth of the callers.
func Example() {
	ctx := context.Background()
	c := control.New(ctx, control.Options{}) // in process; Options.Settings shares it through Redis
	defer c.Close()
	key := "sl:token_bucket:60000ms:sluice_user_alice_"
	c.SetOverride(ctx, control.Override{Rule: "per-user", Who: control.Who(key),
		Limit: ratelimit.PerMinute(600), Until: time.Now().Add(time.Hour)})
	c.SetEnforce(ctx, "per-ip", 10)

	lim, shadow := ratelimit.PerMinute(60), false
	c.Adjust("per-user", key, &lim, &shadow)
	fmt.Println(lim, shadow)
	// Output: 600/1m0s false
}
