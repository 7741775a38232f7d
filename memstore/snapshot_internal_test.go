package memstore

import (
	"bytes"
	"encoding/gob"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/algorithm/slidinglog"
	"github.com/sluicehq/sluice/internal/algorithm/window"
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
		{"version 2", snapshot{Version: 2, K0: 1, K1: 1, TAT: map[uint64]int64{7: 1 << 62}}, "version 2, want 4"},
		{"version 3", snapshot{Version: 3, K0: 1, K1: 1, TAT: map[uint64]int64{7: 1 << 62}}, "version 3, want 4"},
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
	if err := s.Restore(&buf); !errors.Is(err, ErrSnapshotVersion) || !strings.Contains(err.Error(), "version 3, want 4") {
		t.Fatalf("Restore of a version-3 snapshot = %v, want ErrSnapshotVersion", err)
	}
	if n := s.Len(); n != 0 {
		t.Errorf("a refused snapshot left %d keys", n)
	}
}
