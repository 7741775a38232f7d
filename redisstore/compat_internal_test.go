package redisstore

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
	"github.com/sluicehq/sluice/ratelimit"
)

// markerFormScript is window.lua's script as the version before the one
// key runs it: its window.lua as main held it at 08bd969 (the packed
// layout in, the one key not), copied to testdata/markerform, after this
// version's legacy.lua, pairs.lua and batch.lua (the same files then,
// batch.lua's ptime aside, which that window.lua does not call).
func markerFormScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/markerform/window.lua")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join([]string{luaFile("legacy.lua"), luaFile("pairs.lua"), luaFile("batch.lua"), string(b)}, "\n")
}

// openShared opens a store on the shared standalone server srv with prefix
// p (Options.Prefix and Timeout are set), closed when t ends.
func openShared(t *testing.T, srv *redistest.Server, p string, o Options) *Store {
	t.Helper()
	o.Prefix, o.Timeout = p, 10*time.Second
	s, err := Open(context.Background(), srv.URL(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hourEdgeNear reports whether an hour's edge is within a minute of now
// (a window that rolls during a test changes its counts).
func hourEdgeNear() bool {
	m := time.Now().UnixNano() % int64(time.Hour)
	return m < int64(time.Minute) || int64(time.Hour)-m < int64(time.Minute)
}

// TestCompatWindow: during the compatibility window after a store starts,
// a fixed window on Redis's clock is written only in the forms the
// version before reads (the marker form for keys that lone charges use,
// the binary form for the others: never the one key's integer), by lone
// charges and script calls; the version before's own script reads those
// states, counts in them, and the store counts on from what it wrote.
// After the window, the one-key form is written: the marker form is read
// and moved into the key.
func TestCompatWindow(t *testing.T) {
	if hourEdgeNear() {
		t.Skip("an hour's edge is near")
	}
	srv := redistest.Shared(t)
	ctx := context.Background()
	p := "cw" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	s, script := openShared(t, srv, p, Options{}), openShared(t, srv, p, Options{ScriptOnly: true})
	lim := ratelimit.Limit{Rate: 10, Period: time.Hour}
	charge := func(st *Store, key string, remaining int64, what string) {
		t.Helper()
		d, err := st.Apply(ctx, ratelimit.Request{Key: key, Limit: lim, Algorithm: ratelimit.FixedWindow, N: 1})
		if err != nil || !d.Allowed || d.Remaining != remaining {
			t.Fatalf("%s: %+v %v, want allowed with Remaining %d", what, d, err, remaining)
		}
	}
	do := func(args ...string) any {
		t.Helper()
		v, err := srv.Do(args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return v
	}
	millis := func() int64 {
		a := do("TIME").([]any)
		sec, _ := strconv.ParseInt(a[0].(string), 10, 64)
		us, _ := strconv.ParseInt(a[1].(string), 10, 64)
		return sec*1000 + us/1000
	}
	now := millis()
	start := now - now%3600000
	mval := "3600000:" + strconv.FormatInt(start, 10)
	last := start + 3600000 - 1
	key, mkey := s.key(shapeWindow, "lone"), s.markerKey("lone")
	// wantMarkerForm fails t unless "lone" is the marker form of the
	// version before, counting count: no state in the key, the marker
	// naming the window, the count beside it, both expiring at the
	// window's last millisecond.
	wantMarkerForm := func(count int64, what string) {
		t.Helper()
		if v := do("EXISTS", key); v != int64(0) {
			t.Fatalf("%s: the key holds a state (%v), want none", what, do("GET", key))
		}
		if m, c := do("GET", mkey), do("GET", mkey+":"+mval); m != mval || c != strconv.FormatInt(count, 10) {
			t.Fatalf("%s: marker %v and count %v, want %s and %d", what, m, c, mval, count)
		}
		for _, k := range []string{mkey, mkey + ":" + mval} {
			if at := do("PEXPIRETIME", k); at != last {
				t.Fatalf("%s: %s expires at %v, want %d", what, k, at, last)
			}
		}
	}

	// Lone charges: the first goes to the script (Redis's clock not
	// estimated yet: the binary form), the second finds it (the marker
	// set, and the script writes the marker form), the next ones stand.
	for i := range 4 {
		charge(s, "lone", int64(9-i), "a lone charge")
	}
	before := s.Stats()
	charge(s, "lone", 5, "a lone charge that stands")
	if st := s.Stats(); st.Commands != before.Commands+1 || st.FellBack != before.FellBack || st.ScriptCalls != before.ScriptCalls {
		t.Fatalf("stats %+v after %+v: want one plain-command charge that stood", st, before)
	}
	wantMarkerForm(5, "after lone charges")
	// Script calls keep the marker form where there is one, and write
	// the binary form where there is none.
	charge(script, "lone", 4, "a script's charge")
	wantMarkerForm(6, "after a script's charge")
	for i := range 3 {
		charge(script, "batched", int64(9-i), "a script's charge")
	}
	bkey := s.key(shapeWindow, "batched")
	if v, ok := do("GET", bkey).(string); !ok || len(v) != 28 || do("EXISTS", s.markerKey("batched")) != int64(0) {
		t.Fatalf("a key only scripts charged holds %q, want the binary state (28 bytes) and no marker", v)
	}

	// The version before's script reads both (a peek), and counts in the
	// marker form; the store counts on from there.
	old := markerFormScript(t)
	run := func(k, m string, n int) int64 {
		t.Helper()
		v := do("EVAL", old, "2", k, m, strconv.FormatInt(s.minTTL, 10), "0", "1", "10", "3600", "0", "0", strconv.Itoa(n), "", p, "cm", "1").([]any)
		if len(v) != 3 {
			t.Fatalf("the version before's script answered %v", v)
		}
		return v[2].(int64)
	}
	if c := run(key, mkey, 0); c != 6 {
		t.Fatalf("the version before's script reads a count of %d in the marker form, want 6", c)
	}
	if c := run(bkey, s.markerKey("batched"), 0); c != 3 {
		t.Fatalf("the version before's script reads a count of %d in the binary form, want 3", c)
	}
	if c := run(key, mkey, 1); c != 6 {
		t.Fatalf("the version before's script's charge: decided on %d, want 6", c)
	}
	wantMarkerForm(7, "after the version before's charge")
	charge(s, "lone", 2, "a lone charge after the version before's")
	wantMarkerForm(8, "after it")

	// After the window (the store started two hours ago; the marker form
	// is still read for two periods more): the one-key form is written,
	// the marker form moved into it.
	s.started = time.Now().Add(-2 * time.Hour)
	if s.writesMarkers() || !s.readsLegacy(lim) {
		t.Fatalf("two hours after the start: writes markers %v, reads them %v; want false, true", s.writesMarkers(), s.readsLegacy(lim))
	}
	charge(s, "lone", 1, "a lone charge after the window")
	if v, at := do("GET", key), do("PEXPIRETIME", key); v != "9" || at != start+3600000 {
		t.Fatalf("after the window the key holds %v expiring at %v, want 9 at %d", v, at, start+3600000)
	}
	if n := do("EXISTS", mkey, mkey+":"+mval); n != int64(0) {
		t.Fatalf("after the window %v keys of the marker form are left, want none", n)
	}
	before = s.Stats()
	charge(s, "lone", 0, "the next lone charge")
	if st := s.Stats(); st.Commands != before.Commands+1 || st.FellBack != before.FellBack || st.ScriptCalls != before.ScriptCalls {
		t.Fatalf("stats %+v after %+v: want one plain-command charge that stood", st, before)
	}
	if v := do("GET", key); v != "10" {
		t.Fatalf("the key holds %v, want 10", v)
	}
	// Why the window: the version before cannot read the one key.
	if v, err := srv.Do("EVAL", old, "2", key, mkey, strconv.FormatInt(s.minTTL, 10), "0", "1", "10", "3600", "0", "0", "0", "", p, "cm", "1"); err == nil {
		t.Fatalf("the version before's script read the one key: %v, want its error", v)
	}
}

// TestCompatWindowFor checks how long a store writes the marker form
// (Options.CompatWindow: an hour by default, none when negative) and that
// it reads it for two periods more.
func TestCompatWindowFor(t *testing.T) {
	minute := ratelimit.PerMinute(5)
	for _, tc := range []struct {
		window, since time.Duration
		writes, reads bool
	}{
		{0, 0, true, true},
		{0, 59 * time.Minute, true, true},
		{0, 61 * time.Minute, false, true},
		{0, 63 * time.Minute, false, false},
		{-1, 0, false, true},
		{-1, 63 * time.Minute, false, false},
		{3 * time.Hour, 2 * time.Hour, true, true},
		{3 * time.Hour, 3*time.Hour + time.Minute, false, true},
		{3 * time.Hour, 3*time.Hour + 3*time.Minute, false, false},
	} {
		s, err := newStore(false, false, Options{CompatWindow: tc.window})
		if err != nil {
			t.Fatal(err)
		}
		s.started = time.Now().Add(-tc.since)
		if w, r := s.writesMarkers(), s.readsLegacy(minute); w != tc.writes || r != tc.reads {
			t.Errorf("CompatWindow %v, %v after the start: writes markers %v, reads them %v; want %v, %v", tc.window, tc.since, w, r, tc.writes, tc.reads)
		}
		s.Close()
	}
}

// TestMarkerChargeUndo: a marker-form charge on Redis's clock (the
// compatibility window) that set the marker of a window that has not
// begun there (the clock estimate ahead) leaves nothing after its undo;
// one of the window holding Redis's time keeps its marker, its count
// taken back.
func TestMarkerChargeUndo(t *testing.T) {
	srv := redistest.Shared(t)
	ctx := context.Background()
	s := openShared(t, srv, "mcu"+strconv.FormatInt(time.Now().UnixNano(), 36)+":", Options{})
	cn := s.conn.Load()
	lim := ratelimit.Limit{Rate: 10, Period: time.Minute}
	now := time.Now().UnixMilli()
	for _, tc := range []struct {
		key   string
		start int64
		left  int64 // keys of the marker form after the undo
	}{
		{"ahead", now - now%60000 + 120000, 0},
		{"current", now - now%60000, 1},
	} {
		c, _ := s.prepare(cn, ratelimit.Request{Key: tc.key, Limit: lim, Algorithm: ratelimit.FixedWindow, N: 2}, lim, time.Now())
		ch, ok, err := s.markerCharge(ctx, cn, c, hint{period: 60000, start: tc.start}, false)
		mval := "60000:" + strconv.FormatInt(tc.start, 10)
		if err != nil || !ok || !ch.stands || ch.set != mval || ch.count != 2 {
			t.Fatalf("%s: a charge that finds no marker: %+v %v %v, want standing at 2, its marker %s set", tc.key, ch, ok, err, mval)
		}
		if err := s.undo(ctx, cn, c, ch); err != nil {
			t.Fatal(err)
		}
		if n, err := srv.Do("EXISTS", c.mkey, c.mkey+":"+mval); err != nil || n != tc.left {
			t.Fatalf("%s: after the undo %v keys of the marker form (%v), want %d", tc.key, n, err, tc.left)
		}
	}
}

// TestCompatWindowRestart: an instance that starts (its compatibility
// window: the marker form) beside one whose window, and the time it looks
// for states of before, ended hours ago (the one key) share the counts:
// neither admits what the other counted, whichever form the key is in.
// Before, the older instance's lone charges did not look for a marker
// then, and counted from zero beside the newer one's marker form.
func TestCompatWindowRestart(t *testing.T) {
	if hourEdgeNear() {
		t.Skip("an hour's edge is near")
	}
	srv := redistest.Shared(t)
	ctx := context.Background()
	p := "cwr" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	older, newer := openShared(t, srv, p, Options{}), openShared(t, srv, p, Options{})
	older.started = time.Now().Add(-4 * time.Hour)
	lim := ratelimit.Limit{Rate: 20, Period: time.Hour}
	if older.writesMarkers() || older.readsLegacy(lim) || !newer.writesMarkers() {
		t.Fatal("the stores' windows are not as the test needs")
	}
	used := int64(0)
	for i := range 12 {
		// In turns of three: each instance's first charges may go to the
		// script (the clock not estimated yet, a form it moves); the others
		// as plain commands.
		s := older
		if i/3%2 == 1 {
			s = newer
		}
		d, err := s.Apply(ctx, ratelimit.Request{Key: "shared", Limit: lim, Algorithm: ratelimit.FixedWindow, N: 1})
		used++
		if err != nil || !d.Allowed || d.Remaining != lim.Rate-used {
			t.Fatalf("charge %d (the %s instance): %+v %v, want allowed with Remaining %d", i, map[bool]string{true: "older", false: "newer"}[s == older], d, err, lim.Rate-used)
		}
	}
	if st := older.Stats(); st.Commands == 0 {
		t.Fatalf("the older instance sent no plain-command charge (%+v)", st)
	}
}
