package memstore

import (
	"bytes"
	"encoding/gob"
	"errors"
	"strings"
	"testing"
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
		{"even secret", snapshot{Version: snapshotVersion, K0: 2, K1: 1, TAT: map[uint64]int64{7: 1 << 62}}, "malformed key hash"},
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
