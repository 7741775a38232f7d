package loadgen_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/bench/gateway/loadgen"
)

// An open loop at 100 requests/s for 200 ms schedules 20 requests: each is
// sent, or counted unsent when the window closes first.
func ExampleRun() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	r, err := loadgen.Run(context.Background(), loadgen.Config{
		URL: srv.URL, Clients: 4, Duration: 200 * time.Millisecond, Rate: 100,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("scheduled:", r.Requests+r.Unsent, "errors:", r.Errors)
	// Output: scheduled: 20 errors: 0
}
