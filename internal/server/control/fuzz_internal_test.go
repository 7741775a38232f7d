package control

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// FuzzDecodeOverride: a shared override is read from Redis, where anyone
// with access could have written anything; it decodes to a valid limit
// or an error, never a panic, and what it encodes decodes back.
func FuzzDecodeOverride(f *testing.F) {
	o := Override{Rule: "per-ip", Who: "t_remote%5Faddress_10.0.0.1_", Limit: ratelimit.PerMinute(10), Until: time.Unix(1_800_000_000, 0).UTC()}
	f.Add(encodeOverride(o))
	f.Add(`{"rule":"r","who":"w","rate":-1,"period":"1m"}`)
	f.Add(`{"rule":"r","who":"w","rate":1,"period":"-1m"}`)
	f.Add(`{"rule":"r","who":"w","rate":1,"period":"1m","burst":9007199254740993}`)
	f.Add(`{`)
	f.Add(``)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := decodeOverride(s)
		if err != nil {
			return
		}
		if err := got.Limit.Validate(); err != nil {
			t.Errorf("decoded an invalid limit %v from %q", got.Limit, s)
		}
		again, err := decodeOverride(encodeOverride(got))
		if err != nil || again.Limit != got.Limit || again.Rule != got.Rule || again.Who != got.Who || !again.Until.Equal(got.Until) {
			t.Errorf("round trip of %q: got %+v %v, want %+v", s, again, err, got)
		}
	})
}
