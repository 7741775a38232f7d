package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// month is a calendar quota's shape in the store: one fixed window of 20
// covering the period.
var month = ratelimit.Limit{Rate: 20, Period: 31 * 24 * time.Hour}

type journalFixture struct {
	t     *testing.T
	dir   string
	now   time.Time
	store *Store
}

func newJournalFixture(t *testing.T) *journalFixture {
	return &journalFixture{t: t, dir: t.TempDir(), now: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)}
}

func (f *journalFixture) path(name string) string { return filepath.Join(f.dir, name) }

// open makes a store on the fixture's clock, restores the snapshot snap
// when it exists and opens the journal jr; it returns the replay.
func (f *journalFixture) open(snap, jr string) (*Store, JournalReplay, error) {
	f.t.Helper()
	s := New(Options{Now: func() time.Time { return f.now }, SweepInterval: -1})
	f.t.Cleanup(func() { s.Close() })
	if b, err := os.ReadFile(snap); err == nil {
		if err := s.Restore(bytes.NewReader(b)); err != nil {
			f.t.Fatal(err)
		}
	}
	rep, err := s.OpenJournal(jr, JournalOptions{Interval: time.Hour})
	f.store = s
	return s, rep, err
}

// charge spends n of key's monthly quota, one request at a time, and
// returns how many were admitted.
func charge(t *testing.T, s *Store, key string, n int) int {
	t.Helper()
	ok := 0
	for range n {
		d, err := s.Apply(context.Background(), ratelimit.Request{Key: key, Limit: month, Algorithm: ratelimit.FixedWindow, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			ok++
		}
	}
	return ok
}

// remaining peeks at key's monthly quota.
func remaining(t *testing.T, s *Store, key string) int64 {
	t.Helper()
	d, err := s.Apply(context.Background(), ratelimit.Request{Key: key, Limit: month, Algorithm: ratelimit.FixedWindow})
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

// crash copies the files as a SIGKILL would leave them (what was written)
// to new names, as if the process had died now: the store keeps running
// but the copies are what a restart reads.
func (f *journalFixture) crash(names ...string) {
	f.t.Helper()
	for _, n := range names {
		b, err := os.ReadFile(f.path(n))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			f.t.Fatal(err)
		}
		if err := os.WriteFile(f.path("crashed-"+n), b, 0o600); err != nil {
			f.t.Fatal(err)
		}
	}
}

// TestJournalReplaysCharges: 15 of 20 spent and flushed, then a crash:
// the restarted store has 5 left, and charges made after the last flush
// are the only ones lost.
func TestJournalReplaysCharges(t *testing.T) {
	f := newJournalFixture(t)
	s, _, err := f.open(f.path("snap"), f.path("journal"))
	if err != nil {
		t.Fatal(err)
	}
	charge(t, s, "alice", 15)
	charge(t, s, "bob", 3)
	s.jr.Load().flush(s)
	charge(t, s, "alice", 2) // not flushed: lost in the crash
	f.crash("journal")

	r, rep, err := f.open(f.path("none"), f.path("crashed-journal"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Records != 18 || rep.Torn != 0 {
		t.Errorf("replay = %+v, want 18 records, none torn", rep)
	}
	if got := remaining(t, r, "alice"); got != 5 {
		t.Errorf("alice has %d left after the crash, want 5", got)
	}
	if got := remaining(t, r, "bob"); got != 17 {
		t.Errorf("bob has %d left after the crash, want 17", got)
	}
}

// TestJournalSkipsShortKeys: a per-minute window and a bucket are not
// journaled (MinPeriod 1 h); a daily window is.
func TestJournalSkipsShortKeys(t *testing.T) {
	f := newJournalFixture(t)
	s, _, err := f.open(f.path("snap"), f.path("journal"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, req := range []ratelimit.Request{
		{Key: "m", Limit: ratelimit.PerMinute(10), Algorithm: ratelimit.FixedWindow, N: 1},
		{Key: "b", Limit: ratelimit.Limit{Rate: 10, Period: 24 * time.Hour, Burst: 10}, Algorithm: ratelimit.TokenBucket, N: 1},
		{Key: "d", Limit: ratelimit.Limit{Rate: 10, Period: 24 * time.Hour}, Algorithm: ratelimit.SlidingWindowCounter, N: 1},
	} {
		if _, err := s.Apply(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats().JournalRecords; got != 1 {
		t.Errorf("%d records journaled, want 1 (the daily window's)", got)
	}
}

// TestJournalCompactsIntoSnapshot: a snapshot compacts the journal, and a
// crash at each step of writing it (before the snapshot's rename, after
// it but before the journal is rewritten, after both) restarts with every
// flushed charge counted exactly once.
func TestJournalCompactsIntoSnapshot(t *testing.T) {
	for _, step := range []string{"before rename", "before compaction", "after"} {
		t.Run(step, func(t *testing.T) {
			f := newJournalFixture(t)
			s, _, err := f.open(f.path("snap"), f.path("journal"))
			if err != nil {
				t.Fatal(err)
			}
			charge(t, s, "alice", 10)
			charge(t, s, "carol", 4)
			s.jr.Load().flush(s)
			if err := s.SaveSnapshot(f.path("snap")); err != nil { // an older snapshot
				t.Fatal(err)
			}
			charge(t, s, "alice", 2)
			s.jr.Load().flush(s)
			switch step {
			case "before rename":
				// The journal rotated, the new snapshot never landed.
				if _, err := s.snapshot(new(bytes.Buffer)); err != nil {
					t.Fatal(err)
				}
			case "before compaction":
				var buf bytes.Buffer
				if _, err := s.snapshot(&buf); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f.path("snap"), buf.Bytes(), 0o600); err != nil {
					t.Fatal(err)
				}
			default:
				if err := s.SaveSnapshot(f.path("snap")); err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(f.path("journal")); err != nil || fi.Size() != headerLen+frameLen+markLen {
					t.Errorf("journal after compaction: %v, %v; want only its header and mark", fi.Size(), err)
				}
			}
			charge(t, s, "alice", 3)
			charge(t, s, "carol", 1)
			s.jr.Load().flush(s)
			f.crash("snap", "journal")

			r, _, err := f.open(f.path("crashed-snap"), f.path("crashed-journal"))
			if err != nil {
				t.Fatal(err)
			}
			if got := remaining(t, r, "alice"); got != 5 {
				t.Errorf("alice has %d left, want 5 (15 spent, each once)", got)
			}
			if got := remaining(t, r, "carol"); got != 15 {
				t.Errorf("carol has %d left, want 15", got)
			}
		})
	}
}

// TestJournalRefundsAndResets: a refund and a reset after the snapshot
// are replayed too (a record is the key's whole state, not a charge).
func TestJournalRefundsAndResets(t *testing.T) {
	f := newJournalFixture(t)
	s, _, err := f.open(f.path("snap"), f.path("journal"))
	if err != nil {
		t.Fatal(err)
	}
	charge(t, s, "alice", 8)
	charge(t, s, "bob", 8)
	if err := s.SaveSnapshot(f.path("snap")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Apply(ctx, ratelimit.Request{Key: "alice", Limit: month, Algorithm: ratelimit.FixedWindow, N: 3, Refund: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	s.jr.Load().flush(s)
	f.crash("snap", "journal")
	r, _, err := f.open(f.path("crashed-snap"), f.path("crashed-journal"))
	if err != nil {
		t.Fatal(err)
	}
	if got := remaining(t, r, "alice"); got != 15 {
		t.Errorf("alice has %d left, want 15 (8 spent, 3 refunded)", got)
	}
	if got := remaining(t, r, "bob"); got != 20 {
		t.Errorf("bob has %d left, want 20 (reset)", got)
	}
}

// TestJournalLeftFromAnotherRunIsStale: a journal left by a run that had
// one (on), then snapshots written by a run without (off), is older than
// those snapshots when the journal is turned on again: its records are
// not replayed over them.
func TestJournalLeftFromAnotherRunIsStale(t *testing.T) {
	f := newJournalFixture(t)
	on, _, err := f.open(f.path("snap"), f.path("journal"))
	if err != nil {
		t.Fatal(err)
	}
	charge(t, on, "alice", 5)
	if err := on.SaveSnapshot(f.path("snap")); err != nil {
		t.Fatal(err)
	}
	charge(t, on, "alice", 3)
	on.Close()

	off := New(Options{Now: func() time.Time { return f.now }, SweepInterval: -1})
	defer off.Close()
	b, err := os.ReadFile(f.path("snap"))
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Restore(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if _, err := off.Apply(context.Background(), ratelimit.Request{Key: "alice", Limit: month, Algorithm: ratelimit.FixedWindow, N: 1, Refund: true}); err != nil {
		t.Fatal(err)
	}
	if err := off.SaveSnapshot(f.path("snap")); err != nil {
		t.Fatal(err)
	}

	again, rep, err := f.open(f.path("snap"), f.path("journal"))
	if err != nil {
		t.Fatal(err)
	}
	if got := remaining(t, again, "alice"); got != 16 || rep.Records != 0 {
		t.Errorf("%d left and %d records replayed, want 16 (the last snapshot's) and none", got, rep.Records)
	}
}

// TestJournalConcurrentSnapshots: charges on many goroutines while
// snapshots are written and the journal flushed: after a crash every
// charge is counted exactly once.
func TestJournalConcurrentSnapshots(t *testing.T) {
	f := newJournalFixture(t)
	s, _, err := f.open(f.path("snap"), f.path("journal"))
	if err != nil {
		t.Fatal(err)
	}
	big := ratelimit.Limit{Rate: 1 << 20, Period: month.Period}
	const workers, each, keys = 4, 300, 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				req := ratelimit.Request{Key: fmt.Sprint("k", (w+i)%keys), Limit: big, Algorithm: ratelimit.FixedWindow, N: 1}
				if _, err := s.Apply(context.Background(), req); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 5 {
		if err := s.SaveSnapshot(f.path("snap")); err != nil {
			t.Fatal(err)
		}
		s.jr.Load().flush(s)
	}
	wg.Wait()
	s.jr.Load().flush(s)
	f.crash("snap", "journal")
	r, _, err := f.open(f.path("crashed-snap"), f.path("crashed-journal"))
	if err != nil {
		t.Fatal(err)
	}
	used := int64(0)
	for k := range keys {
		d, err := r.Apply(context.Background(), ratelimit.Request{Key: fmt.Sprint("k", k), Limit: big, Algorithm: ratelimit.FixedWindow})
		if err != nil {
			t.Fatal(err)
		}
		used += big.Rate - d.Remaining
	}
	if used != workers*each {
		t.Errorf("%d charges counted after the crash, want %d", used, workers*each)
	}
}

// journalOf writes a journal of n alice charges (each a record) and
// returns its bytes and the offset of each record.
func journalOf(t *testing.T, n int) ([]byte, []int64) {
	f := newJournalFixture(t)
	s, _, err := f.open(f.path("snap"), f.path("journal"))
	if err != nil {
		t.Fatal(err)
	}
	charge(t, s, "alice", n)
	s.Close()
	b, err := os.ReadFile(f.path("journal"))
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for off := int64(headerLen + frameLen + markLen); off < int64(len(b)); off += frameLen + windowLen {
		offs = append(offs, off)
	}
	if len(offs) != n || int(offs[n-1])+frameLen+windowLen != len(b) {
		t.Fatalf("journal of %d bytes, want %d records of %d after the header", len(b), n, frameLen+windowLen)
	}
	return b, offs
}

// TestJournalTornTail: a last record cut short at every length is the
// crash the journal expects: the whole records are replayed, the rest
// dropped and reported, the file cut back, and appends go on from there.
func TestJournalTornTail(t *testing.T) {
	b, offs := journalOf(t, 6)
	last := offs[5]
	for cut := int64(1); cut < frameLen+windowLen; cut++ {
		f := newJournalFixture(t)
		p := f.path("journal")
		torn := append([]byte(nil), b[:last+cut]...)
		if cut == frameLen+windowLen-1 {
			torn = append(b[:last:last], make([]byte, 30)...) // zeros: allocated, never written
		}
		if err := os.WriteFile(p, torn, 0o600); err != nil {
			t.Fatal(err)
		}
		s, rep, err := f.open(f.path("none"), p)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if rep.Records != 5 || rep.TornAt != last || rep.Torn != int64(len(torn))-last {
			t.Errorf("cut %d: replay %+v, want 5 records and the torn one at %d", cut, rep, last)
		}
		if got := remaining(t, s, "alice"); got != 15 {
			t.Errorf("cut %d: %d left, want 15", cut, got)
		}
		charge(t, s, "alice", 1)
		s.Close()
		_, rep, err = f.open(f.path("none"), p)
		if err != nil || rep.Records != 6 || rep.Torn != 0 {
			t.Errorf("cut %d: reopened after an append: %+v, %v; want 6 records, none torn", cut, rep, err)
		}
	}
}

// TestJournalDamageRefused: a damaged record with more after it, or a
// header that is not a journal's, is refused with an error naming the
// file and the offset; the records before it are applied, and the file
// is left as it was.
func TestJournalDamageRefused(t *testing.T) {
	b, offs := journalOf(t, 6)
	for _, tc := range []struct {
		name    string
		damage  func(b []byte)
		at      int64
		applied int64 // alice's remaining after
		reason  string
	}{
		{"record checksum", func(b []byte) { b[offs[3]+10] ^= 0x40 }, offs[3], 17, "record checksum mismatch"},
		{"record length", func(b []byte) { b[offs[2]] = 200 }, offs[2], 18, "record length 200"},
		{"magic", func(b []byte) { b[0] = 'X' }, 0, 20, "not a sluice journal"},
		{"version", func(b []byte) { b[8] = 9 }, 0, 20, "header checksum mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newJournalFixture(t)
			p := f.path("journal")
			bad := append([]byte(nil), b...)
			tc.damage(bad)
			if err := os.WriteFile(p, bad, 0o600); err != nil {
				t.Fatal(err)
			}
			s, _, err := f.open(f.path("none"), p)
			var je *JournalError
			if !errors.As(err, &je) || !errors.Is(err, ErrJournalDamaged) || je.Offset != tc.at || je.Path != p ||
				!strings.Contains(err.Error(), fmt.Sprintf("journal %s: offset %d: %s", p, tc.at, tc.reason)) {
				t.Fatalf("OpenJournal = %v, want a JournalError at offset %d saying %q", err, tc.at, tc.reason)
			}
			if got := remaining(t, s, "alice"); got != tc.applied {
				t.Errorf("%d left, want %d (the records before the damage)", got, tc.applied)
			}
			if after, _ := os.ReadFile(p); !bytes.Equal(after, bad) {
				t.Error("the damaged journal was changed")
			}
			if s.Stats().JournalRecords != 0 || s.jr.Load() != nil {
				t.Error("a journal was opened")
			}
		})
	}
}

// TestJournalOtherSnapshotRefused: a journal written beside another
// snapshot (another key-hash secret) is refused, not misapplied.
func TestJournalOtherSnapshotRefused(t *testing.T) {
	f := newJournalFixture(t)
	a, _, err := f.open(f.path("snap"), f.path("journal"))
	if err != nil {
		t.Fatal(err)
	}
	charge(t, a, "alice", 3)
	a.Close()
	other := New(Options{SweepInterval: -1})
	defer other.Close()
	charge(t, other, "bob", 1)
	if err := other.SaveSnapshot(f.path("other-snap")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.open(f.path("other-snap"), f.path("journal")); !errors.Is(err, ErrJournalDamaged) || !strings.Contains(err.Error(), "another snapshot") {
		t.Fatalf("OpenJournal beside another snapshot = %v, want it refused", err)
	}
}

// TestJournalFlushesOnItsInterval: the journal's goroutine writes the
// buffered records every Interval and Close stops it (synctest's clock).
func TestJournalFlushesOnItsInterval(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		s := New(Options{SweepInterval: -1})
		p := filepath.Join(dir, "journal")
		if _, err := s.OpenJournal(p, JournalOptions{Interval: time.Second}); err != nil {
			t.Fatal(err)
		}
		size := func() int64 {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			return fi.Size()
		}
		charge(t, s, "alice", 2)
		empty := size()
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		if got := size(); got != empty {
			t.Errorf("journal of %d bytes before its interval, want %d", got, empty)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got, want := size(), empty+2*(frameLen+windowLen); got != want {
			t.Errorf("journal of %d bytes after its interval, want %d", got, want)
		}
		s.Close()
	})
}

// TestJournalBufferBound: past MaxBuffer records are dropped and counted,
// not held; one busy shard may use all of it (one key here, in one of 256
// shards), and a write gives it back.
func TestJournalBufferBound(t *testing.T) {
	f := newJournalFixture(t)
	s := New(Options{Now: func() time.Time { return f.now }, SweepInterval: -1})
	defer s.Close()
	if _, err := s.OpenJournal(f.path("journal"), JournalOptions{Interval: time.Hour, MaxBuffer: 10 * (frameLen + windowLen)}); err != nil {
		t.Fatal(err)
	}
	charge(t, s, "alice", 15)
	if st := s.Stats(); st.JournalRecords != 10 || st.JournalDropped != 5 {
		t.Errorf("stats %+v, want 10 records and 5 dropped", st)
	}
	s.jr.Load().flush(s)
	charge(t, s, "alice", 4)
	if st := s.Stats(); st.JournalRecords != 14 || st.JournalDropped != 5 {
		t.Errorf("after a write: stats %+v, want 14 records and 5 dropped", st)
	}
}

// FuzzJournalReader feeds the journal reader arbitrary files: it never
// panics, never reads past the file, and a file it reads whole replays.
func FuzzJournalReader(f *testing.F) {
	j := &journal{bufs: make([]jbuf, 1), chunk: 1 << 10}
	j.budget.Store(1 << 20)
	for i := range int64(3) {
		j.window(0, 12345, int64(month.Period), packWinLimit(20, false), window.State{Start: 1 << 60, Curr: i + 1})
	}
	j.reset(0, 12345)
	b := appendFrame(journalHeader(3, 5), markPayload(1))
	b = append(b, j.bufs[0].b...)
	f.Add(b)
	f.Add(b[:len(b)-7])
	f.Add(appendFrame(b, markPayload(2)))
	f.Add(b[:headerLen])
	f.Add([]byte(journalMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc := scanJournal("fuzz", bytes.NewReader(data))
		if sc.end > int64(len(data)) || (sc.bad == nil && sc.end < headerLen) {
			t.Fatalf("scan of %d bytes ends at %d", len(data), sc.end)
		}
		if sc.bad != nil && (sc.bad.Offset < 0 || sc.bad.Offset > int64(len(data))) {
			t.Fatalf("damage at %d of %d bytes", sc.bad.Offset, len(data))
		}
		dir := t.TempDir()
		p := filepath.Join(dir, "journal")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s := New(Options{SweepInterval: -1, Resolution: -1})
		defer s.Close()
		rep, err := s.OpenJournal(p, JournalOptions{Interval: time.Hour})
		if (err == nil) != (sc.bad == nil) {
			t.Fatalf("OpenJournal = %v, scan found %v", err, sc.bad)
		}
		if err == nil && rep.Torn != int64(len(data))-sc.end {
			t.Fatalf("replay %+v of %d bytes, scan ended at %d", rep, len(data), sc.end)
		}
	})
}
