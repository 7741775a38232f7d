package memstore

import (
	"bytes"
	"encoding/gob"
	"strings"
	"testing"
)

// TestRestoreRefusesOtherSnapshots checks the two snapshots Restore must
// refuse whole: one of another layout version (version 2 hashed keys
// differently, so its states would land on the wrong keys), and one whose
// key-hash secret is malformed (the secret's words are odd).
func TestRestoreRefusesOtherSnapshots(t *testing.T) {
	for _, tc := range []struct {
		name string
		snap snapshot
		want string
	}{
		{"version 2", snapshot{Version: 2, K0: 1, K1: 1, TAT: map[uint64]int64{7: 1 << 62}}, "version 2, want 3"},
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
			if n := s.Len(); n != 0 {
				t.Errorf("a refused snapshot left %d keys", n)
			}
		})
	}
}
