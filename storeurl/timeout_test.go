package storeurl

import (
	"testing"
	"time"
)

func TestTakeTimeout(t *testing.T) {
	for _, tt := range []struct {
		in, out string
		d       time.Duration
		bad     bool
	}{
		{in: "redis://h:6379", out: "redis://h:6379"},
		{in: "redis://h:6379?timeout=250ms", out: "redis://h:6379", d: 250 * time.Millisecond},
		{in: "redis://h:6379/2?dial_timeout=1s&timeout=2s", out: "redis://h:6379/2?dial_timeout=1s", d: 2 * time.Second},
		{in: "redis://h:6379/?timeout=1s", out: "redis://h:6379", d: time.Second},
		{in: "redis://h:6379/?timeout=1s&dial_timeout=1s", out: "redis://h:6379/?dial_timeout=1s", d: time.Second},
		{in: "redis://h:6379?timeout=soon", bad: true},
		{in: "redis://h:6379?timeout=0s", bad: true},
		{in: "redis://h:6379?timeout=2h", bad: true},
		{in: "redis://h:6379?timeout=1s&timeout=2s", bad: true},
	} {
		out, d, err := takeTimeout(tt.in)
		if tt.bad {
			if err == nil {
				t.Errorf("%s: no error", tt.in)
			}
			continue
		}
		if err != nil || out != tt.out || d != tt.d {
			t.Errorf("%s = %q, %v, %v; want %q, %v", tt.in, out, d, err, tt.out, tt.d)
		}
	}
}
