package didyoumean

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"descriptors", "domain", "rate_limit", "requests_per_unit"}
	for _, tc := range []struct{ in, want string }{
		{"domian", "domain"},
		{"RateLimit", "rate_limit"},
		{"requests_per_units", "requests_per_unit"},
		{"zzz", ""},
		{string(make([]byte, 100)), ""},
	} {
		if got := Closest(tc.in, known); got != tc.want {
			t.Errorf("Closest(%.20q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
