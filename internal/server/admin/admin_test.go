package admin_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/server/admin"
)

func TestPprof(t *testing.T) {
	srv := httptest.NewServer(admin.Pprof())
	defer srv.Close()
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/cmdline": "", "/debug/pprof/goroutine?debug=1": "goroutine profile"} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
}

func ExamplePprof() {
	srv := httptest.NewServer(admin.Pprof())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/debug/pprof/cmdline")
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}
