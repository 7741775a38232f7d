package storeurl_test

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/storeurl"
)

// TestLayoutFromURL opens a Redis store with layout=packed: a decision's
// state is a field of a hash, and no string key.
func TestLayoutFromURL(t *testing.T) {
	srv := redistest.Shared(t)
	// "/?": the form a URL without a database takes with parameters.
	st, err := storeurl.Open(context.Background(), srv.URL()+"/?layout=packed&packed_buckets=4&timeout=5s", storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	decide(t, st, "layout-url")
	h, f, ok := st.Redis.Field(ratelimit.GCRA, "layout-url")
	if !ok {
		t.Fatal("the store keeps GCRA states in string keys: want packed")
	}
	if v, err := srv.Do("HEXISTS", h, f); err != nil || v != int64(1) {
		t.Errorf("HEXISTS %q: %v, %v; want 1", h, v, err)
	}
	if v, err := srv.Do("EXISTS", st.Redis.Key(ratelimit.GCRA, "layout-url")); err != nil || v != int64(0) {
		t.Errorf("the string key: %v, %v; want none", v, err)
	}
}

func TestLayoutURLErrors(t *testing.T) {
	for _, u := range []string{
		"redis://127.0.0.1:1?layout=pakced",
		"redis://127.0.0.1:1?layout=packed&layout=string",
		"redis://127.0.0.1:1?layout=packed&packed_buckets=3",
		"redis://127.0.0.1:1?layout=packed&packed_buckets=128",
		"redis://127.0.0.1:1?packed_buckets=4",
	} {
		if st, err := storeurl.Open(context.Background(), u, storeurl.Options{}); err == nil {
			st.Close()
			t.Errorf("%s: no error", u)
		}
	}
}
