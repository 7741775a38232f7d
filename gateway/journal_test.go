package gateway_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/memstore"
)

// TestParseJournal: the journal is on beside snapshot.file by default,
// every second; snapshot.journal turns it off, and a journal_interval out
// of range is refused with its file and line.
func TestParseJournal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		snapshot string
		file     string
		every    time.Duration
		problem  string
	}{
		{"", "", memstore.DefaultJournalInterval, ""},
		{"snapshot: {file: /var/lib/s/state.snap}", "/var/lib/s/state.snap.journal", time.Second, ""},
		{"snapshot: {file: /var/lib/s/state.snap, journal: false}", "", time.Second, ""},
		{"snapshot: {file: /var/lib/s/state.snap, journal_interval: 250ms}", "/var/lib/s/state.snap.journal", 250 * time.Millisecond, ""},
		{"snapshot: {file: /var/lib/s/state.snap, journal_interval: 2m}", "", 0, "gw.yaml:2: snapshot.journal_interval: want a duration from 1ms to 1m0s, got 2m0s"},
		{"snapshot: {file: /var/lib/s/state.snap, journal: sometimes}", "", 0, "gw.yaml:2: snapshot.journal"},
	} {
		cfg, err := gateway.Parse("gw.yaml", []byte("upstream: builtin:echo\n"+tc.snapshot+"\nroutes:\n  - path: /\n"))
		if tc.problem != "" {
			if err == nil || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("%s: Parse = %v, want %q", tc.snapshot, err, tc.problem)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.snapshot, err)
		}
		if cfg.JournalFile() != tc.file || cfg.JournalEvery != tc.every {
			t.Errorf("%s: journal %q every %v, want %q every %v", tc.snapshot, cfg.JournalFile(), cfg.JournalEvery, tc.file, tc.every)
		}
	}
}

// TestJournalNotOpenedKeepsServing: a journal that cannot be opened (here
// its path is a directory) does not keep the gateway down, as a snapshot
// that cannot be written does not: it is logged and the gateway serves.
func TestJournalNotOpenedKeepsServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.Mkdir(filepath.Join(dir, "state.snap.journal"), 0o755))
	cfg, err := gateway.Parse(filepath.Join(dir, "gw.yaml"), []byte("upstream: builtin:echo\nsnapshot: {file: state.snap}\nroutes:\n  - path: /\n"))
	must(t, err)
	var log bytes.Buffer
	g, err := gateway.New(t.Context(), cfg, gateway.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatalf("New = %v, want the gateway to start without its journal", err)
	}
	must(t, g.Close())
	if !strings.Contains(log.String(), `msg="gateway: journal not opened: a crash loses the quotas' charges since the last snapshot"`) {
		t.Errorf("log:\n%s\nwants the journal's failure", log.String())
	}
}
