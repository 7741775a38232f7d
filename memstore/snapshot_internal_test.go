package memstore

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// TestRestoreRefusesOtherSnapshots checks the snapshots Restore must refuse
// whole: those of another version (versions 2 and 3 hashed keys
// differently, so their states would land on the wrong keys; version 3's
// hash let public-constant words zero its mixing steps), and one whose
// key-hash secret is malformed (the secret's words are odd).
func TestRestoreRefusesOtherSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name string
		snap snapshot
		want string
	}{
		{"version 2", snapshot{Version: 2, K0: 1, K1: 1, TAT: map[uint64]int64{7: 1 << 62}}, "version 2, want 4 to 5"},
		{"version 3", snapshot{Version: 3, K0: 1, K1: 1, TAT: map[uint64]int64{7: 1 << 62}}, "version 3, want 4 to 5"},
		{"even secret", snapshot{Version: snapshotVersion, K0: 2, K1: 1, TAT: map[uint64]int64{7: 1 << 62}, TATLimit: map[uint64]uint32{7: 1}}, "malformed key hash"},
		{"no limit", snapshot{Version: snapshotVersion, K0: 1, K1: 1, TAT: map[uint64]int64{7: 1 << 62}}, "key 0x7: malformed limit"},
		{"no window limit", snapshot{Version: snapshotVersion, K0: 1, K1: 1, Win: map[uint64]snapWin{7: {State: window.State{Start: 1 << 62, Curr: 1}}}}, "key 0x7: malformed window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := gob.NewEncoder(&buf).Encode(&tc.snap); err != nil {
				t.Fatal(err)
			}
			s := New(Options{SweepInterval: -1})
			defer s.Close()
			err := s.Restore(&buf)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore = %v, want an error saying %q", err, tc.want)
			}
			if tc.snap.Version != snapshotVersion && !errors.Is(err, ErrSnapshotVersion) {
				t.Errorf("Restore = %v, want it to wrap ErrSnapshotVersion", err)
			}
			if n := s.Len(); n != 0 {
				t.Errorf("a refused snapshot left %d keys", n)
			}
		})
	}
}

// TestRestoreRefusesVersion3Layout encodes a snapshot in the layout
// version 3 wrote (its windows and logs had no limits) and checks that
// Restore decodes it far enough to refuse it by its version.
func TestRestoreRefusesVersion3Layout(t *testing.T) {
	type snapWinV3 struct {
		State window.State
		Exp   int64
	}
	type snapLogV3 struct {
		Log []slidinglog.Entry
		Exp int64
	}
	type snapshotV3 struct {
		Version int
		K0, K1  uint64
		TAT     map[uint64]int64
		Win     map[uint64]snapWinV3
		Logs    map[uint64]snapLogV3
	}
	old := snapshotV3{Version: 3, K0: 1, K1: 3,
		TAT:  map[uint64]int64{7: 1 << 62},
		Win:  map[uint64]snapWinV3{8: {window.State{Start: 1 << 62, Curr: 1}, 1<<62 + 1}},
		Logs: map[uint64]snapLogV3{9: {[]slidinglog.Entry{{At: 1 << 62, N: 1}}, 1<<62 + 1}}}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&old); err != nil {
		t.Fatal(err)
	}
	s := New(Options{SweepInterval: -1})
	defer s.Close()
	if err := s.Restore(&buf); !errors.Is(err, ErrSnapshotVersion) || !strings.Contains(err.Error(), "version 3, want 4 to 5") {
		t.Fatalf("Restore of a version-3 snapshot = %v, want ErrSnapshotVersion", err)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("a refused snapshot left %d keys", n)
	}
}

// TestRestoreCarriesIntervals checks that a snapshot keeps each bucket
// key's emission interval, so a limit changed across a restart converts
// the state (3 used at 5/min leave 47 of 50/min), and that a version 4
// snapshot, which has no intervals, is still restored, its states taken as
// made under the first limit that meets them.
func TestRestoreCarriesIntervals(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a := New(Options{Now: clock, SweepInterval: -1})
	defer a.Close()
	ctx := context.Background()
	for range 3 {
		if _, err := a.Apply(ctx, ratelimit.Request{Key: "k", Limit: ratelimit.PerMinute(5), N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := a.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	v5 := buf.Bytes()

	// Version 4's layout: no TATInterval.
	type snapshotV4 struct {
		Version  int
		K0, K1   uint64
		TAT      map[uint64]int64
		TATLimit map[uint64]uint32
		Win      map[uint64]snapWin
		Logs     map[uint64]snapLog
	}
	var cur snapshot
	if err := gob.NewDecoder(bytes.NewReader(v5)).Decode(&cur); err != nil {
		t.Fatal(err)
	}
	var v4 bytes.Buffer
	if err := gob.NewEncoder(&v4).Encode(&snapshotV4{4, cur.K0, cur.K1, cur.TAT, cur.TATLimit, cur.Win, cur.Logs}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		snap []byte
		want int64
	}{
		// 36 s of backlog at 12 s an event: 3 used, 47 left of 50.
		{"version 5", v5, 47},
		// The interval unknown: the 36 s are taken as 1.2 s events, as
		// before limits were converted: 30 used, 20 left.
		{"version 4", v4.Bytes(), 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(Options{Now: clock, SweepInterval: -1})
			defer b.Close()
			if err := b.Restore(bytes.NewReader(tc.snap)); err != nil {
				t.Fatal(err)
			}
			d, err := b.Apply(ctx, ratelimit.Request{Key: "k", Limit: ratelimit.PerMinute(50)})
			if err != nil {
				t.Fatal(err)
			}
			if d.Remaining != tc.want {
				t.Errorf("restored, then peeked under 50/min: remaining %d, want %d", d.Remaining, tc.want)
			}
			// Once a limit has met the key, the key is tagged with it.
			d, err = b.Apply(ctx, ratelimit.Request{Key: "k", Limit: ratelimit.PerMinute(5)})
			if err != nil {
				t.Fatal(err)
			}
			// Version 5: back to 3 of 5 used. Version 4: 30 of 50 used
			// are more than 5: none left.
			if want := map[string]int64{"version 5": 2, "version 4": 0}[tc.name]; d.Remaining != want {
				t.Errorf("then peeked under 5/min: remaining %d, want %d", d.Remaining, want)
			}
		})
	}
}
