package status_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/server/status"
)

// FuzzEntries: any string parses or is refused without a panic; a key
// that parses has a domain and key/value pairs, and Label shows them.
func FuzzEntries(f *testing.F) {
	for _, s := range []string{"sl:token_bucket:60000ms:sluice_remote%5Faddress_127.0.0.1_", "sl:quota:2026-11:api_user_a%25b_",
		"sl:gcra:1000ms:d%5Fom_k_v_k2_v2_", "sl:gcra:1000ms:dom_k_", "sl:::", "sl:a:b:c_d_e_", "x", "", "sl:a:b:_%_%%_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		dom, kv, ok := status.Entries(key)
		label := status.Label(key)
		if !ok {
			if label != key {
				t.Errorf("Label(%q) = %q for a key that does not parse", key, label)
			}
			return
		}
		if len(kv) == 0 || len(kv)%2 != 0 {
			t.Errorf("Entries(%q) = %q %q: want key/value pairs", key, dom, kv)
		}
		if !strings.Contains(label, "=") {
			t.Errorf("Label(%q) = %q", key, label)
		}
	})
}
