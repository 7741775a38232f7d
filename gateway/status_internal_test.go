package gateway

import "testing"

// FuzzParseIdentity: the lookup box and the admin API take any string.
func FuzzParseIdentity(f *testing.F) {
	for _, s := range []string{"user:alice", "ip:203.0.113.7", "203.0.113.7", "2001:db8::1", "ip:nope", "alice", "", " ", "user:", "ip:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := parseIdentity(s)
		if err != nil {
			return
		}
		if id.Authenticated == id.IP.IsValid() {
			t.Errorf("parseIdentity(%q) = %+v: want a user or an address", s, id)
		}
	})
}
