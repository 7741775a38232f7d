package redislink

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// TestBaseCheck: both stores' shared options are refused and defaulted in
// one place, with the store's name in the error.
func TestBaseCheck(t *testing.T) {
	b := Base{Timeout: -time.Second}
	if err := b.Check("redisstore"); err != nil || b.Prefix != DefaultPrefix || b.Timeout != DefaultTimeout || b.MinTTL() != 1 {
		t.Errorf("zero Base: %+v, %v; want the defaults", b, err)
	}
	if b := (Base{Now: true}); b.MinTTL() != MinTTLWithNow.Milliseconds() {
		t.Errorf("MinTTL with Now = %d", b.MinTTL())
	}
	for _, b := range []Base{{Prefix: "a{b"}, {Prefix: "}"}, {OnError: ratelimit.FailLocal + 1}} {
		if err := b.Check("redisinflight"); err == nil || !strings.HasPrefix(err.Error(), "redisinflight: ") {
			t.Errorf("%+v: %v; want an error prefixed redisinflight", b, err)
		}
	}
}
