package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestKeyChargeChecks drives one-key charges (keyCharge, undo) on a real
// Redis in windows the store's clock estimate would not pick: a window
// that has ended (PEXPIREAT in the past deletes the key it made: nothing
// counted, nothing to undo), an undo after the key moved to another
// window (it takes nothing from it), and a count with no expiry (adopted
// by the window, never fewer).
func TestKeyChargeChecks(t *testing.T) {
	srv := redistest.Shared(t)
	ctx := context.Background()
	s := openShared(t, srv, "kcc"+strconv.FormatInt(time.Now().UnixNano(), 36)+":", Options{})
	cn := s.conn.Load()
	lim := ratelimit.Limit{Rate: 10, Period: time.Second}
	call := func(key string) *call {
		c, _ := s.prepare(cn, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.FixedWindow, N: 2}, lim, time.Now())
		return c
	}
	now := func() int64 {
		v, err := srv.Do("TIME")
		if err != nil {
			t.Fatal(err)
		}
		a := v.([]any)
		sec, _ := strconv.ParseInt(a[0].(string), 10, 64)
		return sec * 1000
	}
	get := func(key string) (any, any) {
		v, _ := srv.Do("GET", key)
		exp, _ := srv.Do("PEXPIRETIME", key)
		return v, exp
	}

	// A window that ended: the fresh key the increment made is deleted
	// by PEXPIREAT in the past, and the charge does not stand.
	c := call("ended")
	ended := hint{period: 1000, start: now() - 5000}
	ch, ok, err := s.keyCharge(ctx, cn, c, ended)
	if err != nil || !ok || ch.stands || ch.key != "" {
		t.Fatalf("a charge in a window that ended: %+v %v %v, want answered, not standing, nothing to undo", ch, ok, err)
	}
	if v, exp := get(c.key); v != nil || exp != int64(-2) {
		t.Fatalf("after it the key holds %v expiring at %v, want none", v, exp)
	}

	// An undo after its key moved to another window takes nothing.
	c = call("moved")
	later := now() + 60000
	if _, err := srv.Do("SET", c.key, "7", "PXAT", strconv.FormatInt(later, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.undo(ctx, cn, c, charge{key: c.key, exp: strconv.FormatInt(later-1000, 10)}); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(c.key); v != "7" {
		t.Fatalf("an undo of a window before: the key holds %v, want 7 untouched", v)
	}
	if err := s.undo(ctx, cn, c, charge{key: c.key, exp: strconv.FormatInt(later, 10)}); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(c.key); v != "5" {
		t.Fatalf("an undo of its own window: the key holds %v, want 5", v)
	}
	// Nor from a binary state a script wrote since.
	if _, err := srv.Do("SET", c.key, string(make([]byte, 28)), "PXAT", strconv.FormatInt(later, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.undo(ctx, cn, c, charge{key: c.key, exp: strconv.FormatInt(later, 10)}); err != nil {
		t.Fatalf("an undo on a binary state: %v", err)
	}

	// A count with no expiry: the window adopts it (PEXPIREAT NX), and
	// the charge stands on the whole count.
	c = call("persistent")
	if _, err := srv.Do("SET", c.key, "5"); err != nil {
		t.Fatal(err)
	}
	at := now() + 30000
	h := hint{period: 60000, start: at - at%60000}
	ch, ok, err = s.keyCharge(ctx, cn, c, h)
	if err != nil || !ok || !ch.stands || ch.count != 7 {
		t.Fatalf("a charge on a count with no expiry: %+v %v %v, want standing at 7", ch, ok, err)
	}
	if v, exp := get(c.key); v != "7" || exp != h.start+h.period {
		t.Fatalf("after it the key holds %v expiring at %v, want 7 at %d", v, exp, h.start+h.period)
	}
}
