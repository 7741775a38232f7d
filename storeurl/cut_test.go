package storeurl

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

// FuzzCutParams: whatever the URL, the cutter that takes the layout,
// compatibility-window and timeout parameters out of a store URL never
// panics, and what it leaves keeps the URL's head and every other
// parameter, and none of those it took.
func FuzzCutParams(f *testing.F) {
	for _, s := range []string{"redis://h:6379?layout=packed", "redis://h/?layout=packed&packed_buckets=4&x=%41", "redis://h?compat_window=off&timeout=1s", "memory", "?;layout=1", "redis://h?layout=a&layout=b", "redis://h/?"} {
		f.Add(s)
	}
	names := []string{ParamLayout, ParamPackedBuckets, ParamCompatWindow}
	f.Fuzz(func(t *testing.T, raw string) {
		q, rest, found, err := cutParams(raw, names...)
		if err != nil || !found {
			if err == nil && rest != raw {
				t.Fatalf("%q: nothing taken, yet %q left", raw, rest)
			}
			return
		}
		head, _, _ := strings.Cut(raw, "?")
		restHead, restQuery, _ := strings.Cut(rest, "?")
		if restHead != head && restHead+"/" != head {
			t.Fatalf("%q: head %q left as %q", raw, head, restHead)
		}
		left, err := url.ParseQuery(restQuery)
		if err != nil {
			t.Fatalf("%q: left %q, whose query does not parse: %v", raw, rest, err)
		}
		for _, p := range names {
			if left.Has(p) {
				t.Fatalf("%q: %q keeps %s", raw, rest, p)
			}
		}
		for k, v := range q {
			if !slices.Contains(names, k) && !slices.Equal(left[k], v) {
				t.Fatalf("%q: %s=%q left as %q", raw, k, v, left[k])
			}
		}
	})
}
