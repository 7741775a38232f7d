package status_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/server/status"
)

// A rule denies one caller often and another once: the page lists the
// first at the top, by who it is (the store key's descriptor entries).
func Example() {
	rec := status.NewRecorder(status.Options{})
	rec.SetRules([]status.RuleInfo{{ID: "per-ip", Name: "per-ip", Limit: "5/1m0s"}})
	rl := rec.Rule("per-ip")
	for range 50 {
		rl.Record(status.Denied, "sl:token_bucket:60000ms:sluice_remote%5Faddress_203.0.113.7_")
	}
	rl.Record(status.Denied, "sl:token_bucket:60000ms:sluice_remote%5Faddress_10.0.0.1_")
	page := (&status.Server{Name: "gateway", Recorder: rec}).Page(context.Background(), "")
	for _, t := range page.Rules[0].TopDenied {
		fmt.Println(t.Who, t.Count)
	}
	// Output:
	// remote_address=203.0.113.7 50
	// remote_address=10.0.0.1 1
}
