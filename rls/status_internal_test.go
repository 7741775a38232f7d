package rls

import "testing"

// FuzzParseDescriptor: the lookup box and the admin API take any string.
func FuzzParseDescriptor(f *testing.F) {
	for _, s := range []string{"edge: remote_address=10.0.0.1", "a=b, c=d", "sl:fixed_window:3600000ms:edge_remote%5Faddress_10.0.0.9_",
		"sl:x", ":", "=", ",,,", "d: =", "", "key"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, entries, err := parseDescriptor(s)
		if err == nil && len(entries) == 0 {
			t.Errorf("parseDescriptor(%q): no entries and no error", s)
		}
	})
}
