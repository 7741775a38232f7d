package memstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
)

// Quotas that survive a crash: restore the snapshot, open the journal
// beside it, write snapshots with SaveSnapshot (it compacts the journal).
// A crash loses at most the journal's interval (1 s) of the charges.
func ExampleStore_OpenJournal() {
	dir, err := os.MkdirTemp("", "memstore-journal")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	snap, journal := filepath.Join(dir, "state.snap"), filepath.Join(dir, "state.snap.journal")
	clock := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	opts := memstore.Options{Now: func() time.Time { return clock }}
	ctx := context.Background()
	monthly := ratelimit.Request{Key: "alice", Limit: ratelimit.Limit{Rate: 20, Period: 31 * 24 * time.Hour}, Algorithm: ratelimit.FixedWindow, N: 1}

	// open restores the snapshot, if there is one, and opens the journal.
	open := func() *memstore.Store {
		s := memstore.New(opts)
		if b, err := os.ReadFile(snap); err == nil {
			if err := s.Restore(bytes.NewReader(b)); err != nil {
				fmt.Println(err)
			}
		}
		rep, err := s.OpenJournal(journal, memstore.JournalOptions{})
		fmt.Printf("replayed %d records (%v)\n", rep.Records, err)
		return s
	}

	s := open()
	for range 10 {
		s.Apply(ctx, monthly)
	}
	if err := s.SaveSnapshot(snap); err != nil {
		fmt.Println(err)
	}
	for range 5 {
		s.Apply(ctx, monthly) // in the journal only
	}
	s.Close() // writes out the journal, as its goroutine does every second

	r := open()
	defer r.Close()
	d, _ := r.Apply(ctx, monthly)
	fmt.Println("remaining:", d.Remaining)
	// Output:
	// replayed 0 records (<nil>)
	// replayed 5 records (<nil>)
	// remaining: 4
}
