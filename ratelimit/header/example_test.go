package header_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/ratelimit/header"
)

// The mode names a config or flag may give; the empty string is none (each
// door states its own default).
func ExampleParseMode() {
	for _, s := range []string{"ietf", "legacy", "opaque", "", "x-ratelimit"} {
		m, err := header.ParseMode(s)
		fmt.Println(m, err)
	}
	// Output:
	// ietf <nil>
	// legacy <nil>
	// off <nil>
	// ietf unknown header mode "" (want ietf, legacy or off)
	// ietf unknown header mode "x-ratelimit" (want ietf, legacy or off)
}

// The headers of one enforced policy after a request, in each mode.
func ExampleWrite() {
	p := []header.State{{Name: "per-user", Quota: 100, Window: 60, Remaining: 42, Reset: 17}}
	for _, m := range []header.Mode{header.IETF, header.Legacy, header.Off} {
		fmt.Println(m.String() + ":")
		header.Write(m, p, func(name, value string) { fmt.Printf("  %s: %s\n", name, value) })
	}
	// Output:
	// ietf:
	//   RateLimit-Policy: "per-user";q=100;w=60
	//   RateLimit: "per-user";r=42;t=17
	// legacy:
	//   X-RateLimit-Limit: 100
	//   X-RateLimit-Remaining: 42
	//   X-RateLimit-Reset: 17
	// off:
}

func TestParseMode(t *testing.T) {
	for s, want := range map[string]header.Mode{"ietf": header.IETF, "legacy": header.Legacy, "off": header.Off, "opaque": header.Off, "none": header.Off} {
		if got, err := header.ParseMode(s); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v, want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "x-ratelimit", "IETF"} {
		if _, err := header.ParseMode(s); err == nil {
			t.Errorf("ParseMode(%q) = nil error", s)
		}
	}
}

// A policy name as a structured field string, escaped.
func ExampleAppendString() {
	b := header.AppendString(nil, `tier "gold"`)
	fmt.Println(string(append(b, ";q=100;w=60"...)))
	// Output: "tier \"gold\"";q=100;w=60
}
