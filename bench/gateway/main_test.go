package main

import (
	"context"
	"testing"
	"time"
)

// TestRun checks the harness, not the speed: both variants serve without
// errors or denials, and only limits on sets RateLimit headers.
func TestRun(t *testing.T) {
	servers, err := startInProcess(context.Background(), [2]bool{true, false})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	r := run(servers, 4, 100*time.Millisecond, 2)
	for _, v := range []Variant{r.Off, r.On} {
		if v.Requests == 0 || v.Errors != 0 || v.Denied != 0 {
			t.Errorf("%s: %d requests, %d errors, %d denied; want some, none, none", v.Name, v.Requests, v.Errors, v.Denied)
		}
	}
	if r.Off.Headers || !r.On.Headers {
		t.Errorf("headers: limits off %v, limits on %v; want false, true", r.Off.Headers, r.On.Headers)
	}
}

func TestProcCPU(t *testing.T) {
	if _, ok := procCPU(1); !ok {
		t.Skip("no /proc")
	}
}
