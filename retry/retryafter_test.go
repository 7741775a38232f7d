package retry

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in    string
		want  time.Duration
		valid bool
	}{
		{"0", 0, true},
		{"1", time.Second, true},
		{"120", 2 * time.Minute, true},
		{"  30  ", 30 * time.Second, true},
		{"007", 7 * time.Second, true},
		{"86400", 24 * time.Hour, true},
		{"86401", MaxRetryAfter, true},                      // absurd: clamped
		{"99999999999999999999999999", MaxRetryAfter, true}, // overflows int64: clamped
		{"-5", 0, true},                                     // negative: clamped
		{"-0", 0, true},
		{"1.5", 2 * time.Second, true}, // not RFC 9110, but sent: rounded up
		{"0.001", time.Second, true},
		{"2.0", 2 * time.Second, true},
		{".5", time.Second, true},
		// IMF-fixdate, RFC 850 and asctime.
		{"Sat, 21 Nov 2026 10:00:30 GMT", 30 * time.Second, true},
		{"Saturday, 21-Nov-26 10:01:00 GMT", time.Minute, true},
		{"Sat Nov 21 10:00:05 2026", 5 * time.Second, true},
		{"Sat, 21 Nov 2026 09:59:00 GMT", 0, true},             // past: no delay
		{"Sun, 06 Nov 1994 08:49:37 GMT", 0, true},             // long past
		{"Fri, 31 Dec 9999 23:59:59 GMT", MaxRetryAfter, true}, // absurd future
		{"", 0, false},
		{"   ", 0, false},
		{"soon", 0, false},
		{"1e3", 0, false},
		{"+5", 0, false},
		{"5s", 0, false},
		{"-", 0, false},
		{".", 0, false},
		{"1.2.3", 0, false},
		{"Sat, 21 Nov 2026 10:00:30", 0, false}, // no zone
		{"2026-11-21T10:00:30Z", 0, false},      // not an HTTP-date
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.valid {
			t.Errorf("ParseRetryAfter(%q) = %v, %v, want %v, %v", tt.in, got, ok, tt.want, tt.valid)
		}
	}
}

// TestRetryAfterSkew: a date is read against the response's Date field, so
// neither side's clock skew changes the delay.
func TestRetryAfterSkew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		retry, date string
		want        time.Duration
		valid       bool
	}{
		{"server clock an hour fast", "Sat, 21 Nov 2026 11:00:30 GMT", "Sat, 21 Nov 2026 11:00:00 GMT", 30 * time.Second, true},
		{"server clock a day slow", "Fri, 20 Nov 2026 10:00:10 GMT", "Fri, 20 Nov 2026 10:00:00 GMT", 10 * time.Second, true},
		{"no Date field: our clock", "Sat, 21 Nov 2026 10:00:10 GMT", "", 10 * time.Second, true},
		{"bad Date field: our clock", "Sat, 21 Nov 2026 10:00:10 GMT", "yesterday", 10 * time.Second, true},
		{"before its own Date", "Sat, 21 Nov 2026 10:00:00 GMT", "Sat, 21 Nov 2026 10:00:09 GMT", 0, true},
		{"seconds ignore Date", "7", "Sat, 21 Nov 2020 10:00:00 GMT", 7 * time.Second, true},
		{"absent", "", "Sat, 21 Nov 2026 10:00:00 GMT", 0, false},
		{"garbage", "later", "", 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.retry != "" {
			h.Set("Retry-After", tt.retry)
		}
		if tt.date != "" {
			h.Set("Date", tt.date)
		}
		got, ok := RetryAfter(h, now)
		if got != tt.want || ok != tt.valid {
			t.Errorf("%s: RetryAfter(%q, Date %q) = %v, %v, want %v, %v", tt.name, tt.retry, tt.date, got, ok, tt.want, tt.valid)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "-1", "1.5", "99999999999999999999",
		"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Fri, 31 Dec 9999 23:59:59 GMT", "", "x"} {
		f.Add(s, int64(0))
	}
	f.Fuzz(func(t *testing.T, v string, skew int64) {
		at := now.Add(time.Duration(skew))
		d, ok := ParseRetryAfter(v, at)
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("ParseRetryAfter(%q) = %v, want in [0, %v]", v, d, MaxRetryAfter)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false, want 0 when invalid", v, d)
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil && n <= math.MaxInt32 {
			if want := min(time.Duration(n)*time.Second, MaxRetryAfter); d != want || !ok {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v, want %v, true", v, d, ok, want)
			}
		}
		h := http.Header{"Retry-After": {v}, "Date": {v}}
		if d2, ok2 := RetryAfter(h, at); d2 < 0 || d2 > MaxRetryAfter || ok2 != ok {
			t.Fatalf("RetryAfter(%q) = %v, %v, want in range and ok = %v", v, d2, ok2, ok)
		}
	})
}

func BenchmarkParseRetryAfter(b *testing.B) {
	for _, v := range []string{"120", "Sat, 21 Nov 2026 10:00:30 GMT"} {
		b.Run(v[:3], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ParseRetryAfter(v, now)
			}
		})
	}
}
