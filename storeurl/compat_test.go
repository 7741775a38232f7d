package storeurl_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/storeurl"
)

// TestCompatWindowFromURL: a fixed window's first charge on Redis's clock
// writes no integer in the one key in the compatibility window (the
// default, and 3h: the marker form or the binary one), and does with
// compat_window=off.
func TestCompatWindowFromURL(t *testing.T) {
	srv := redistest.Shared(t)
	for _, tc := range []struct {
		query, key string
		integer    bool
	}{
		{"", "compat-default", false},
		{"?compat_window=3h", "compat-3h", false},
		{"?compat_window=off", "compat-off", true},
	} {
		st, err := storeurl.Open(context.Background(), srv.URL()+tc.query, storeurl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		req := ratelimit.Request{Key: tc.key + time.Now().Format("150405.000"), Limit: ratelimit.Limit{Rate: 10, Period: time.Hour}, Algorithm: ratelimit.FixedWindow, N: 1}
		if d, err := st.Apply(context.Background(), req); err != nil || !d.Allowed {
			t.Fatalf("%s: %+v %v", tc.query, d, err)
		}
		v, err := srv.Do("GET", st.Redis.Key(ratelimit.FixedWindow, req.Key))
		st.Close()
		if err != nil || (v == "1") != tc.integer {
			t.Errorf("%q: the key holds %q (%v), want the integer form %v", tc.query, v, err, tc.integer)
		}
	}
}

func TestCompatWindowURLErrors(t *testing.T) {
	for _, u := range []string{
		"redis://127.0.0.1:1?compat_window=on",
		"redis://127.0.0.1:1?compat_window=30s",
		"redis://127.0.0.1:1?compat_window=200h",
		"redis://127.0.0.1:1?compat_window=off&compat_window=1h",
	} {
		if st, err := storeurl.Open(context.Background(), u, storeurl.Options{}); err == nil {
			st.Close()
			t.Errorf("%s: no error", u)
		}
	}
}
