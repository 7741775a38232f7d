package memstore

import (
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicehq/sluice/algorithm/slidinglog"
	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// snapshotVersion changes whenever the snapshot layout, or the key hash
// that made its keys, does. 3: keyHash.sum changed; 4: every mixing step of
// keyHash.sum depends on the secret; 5: each bucket key's
// emission interval (TATInterval), so that a limit changed across a
// restart converts the state. Restore reads version 4 too (same key hash):
// its bucket keys' interval is unknown, and the first request under any
// limit adopts them as they are.
const snapshotVersion = 5

// oldestSnapshot is the oldest version Restore reads.
const oldestSnapshot = 4

// snapshot is the layout Snapshot writes with encoding/gob. Fields are
// only ever added (gob matches them by name), so that Restore can decode a
// snapshot of an older version far enough to refuse it by its Version.
type snapshot struct {
	Version  int
	K0, K1   uint64 // the key hash's secret
	TAT      map[uint64]int64
	TATLimit map[uint64]uint32 // each TAT key's packed limit (tatLimit); since version 4
	// TATInterval is each TAT key's emission interval (ns), the one its
	// state was made under; since version 5.
	TATInterval map[uint64]int64
	Win         map[uint64]snapWin
	Logs        map[uint64]snapLog
	// Journal is the generation of the journal mark written just before
	// the snapshot read the shards (journal.rotate): replay starts there.
	// Without a journal open, one past the generation of the snapshot
	// restored. 0: written before journals.
	Journal uint64
}

type snapWin struct {
	State  window.State
	Period int64  // since version 4, with Limit
	Limit  uint32 // the packed limit (winLimit)
}

type snapLog struct {
	Log    []slidinglog.Entry
	Exp    int64
	Rate   int64 // since version 4, with Period and Used; held as 11 significant bits, rounded down (winLimit)
	Period int64
	Used   int64
}

// Snapshot writes the state of every key that has not decayed to w, so a
// process can restart without forgetting what its callers have spent
// (calendar quotas, long windows). Keys are written as they are held: as
// hashes, with the secret that made them, so a snapshot must be guarded
// like the store's memory.
//
// A key's hash is held as 56 bits and its shard (tatWord): whole in a
// store of 256 shards or more. A store of fewer shards (fewer than 4096
// keys, or Options.Shards) writes the bits it does not hold as zeros, so
// its keys are found again by a store of as many shards or fewer (the
// same Options find them all) and lost, as if new, by one of more.
//
// With a journal open (OpenJournal), the snapshot records the journal's
// position; SaveSnapshot, which also compacts the journal, is then the
// way to write one.
func (s *Store) Snapshot(w io.Writer) error {
	_, err := s.snapshot(w)
	return err
}

// snapshot is Snapshot, returning the journal generation the snapshot
// records.
func (s *Store) snapshot(w io.Writer) (uint64, error) {
	// Without a journal open the snapshot still moves the generation on,
	// past every mark of a journal left from a run that had one: that
	// journal is older than this snapshot and is not replayed over it.
	gen := s.snapGen + 1
	if j := s.jr.Load(); j != nil {
		var err error
		if gen, err = j.rotate(s); err != nil {
			return 0, fmt.Errorf("memstore: write snapshot: %w", err)
		}
	}
	now := s.clock()
	snap := snapshot{Version: snapshotVersion, K0: s.hash.k0, K1: s.hash.k1, Journal: gen,
		TAT: map[uint64]int64{}, TATLimit: map[uint64]uint32{}, TATInterval: map[uint64]int64{}, Win: map[uint64]snapWin{}, Logs: map[uint64]snapLog{}}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.tat.all(0, func(e *tatSlot, w uint64, lim tatLimit) bool {
			if v := e.tat.Load(); v > now {
				// The key's hash: the word's low bits, the shard's top
				// ones (all 64 in a store of 256 shards or more).
				k := w&lowMask | uint64(i)<<s.shift
				snap.TAT[k] = v
				snap.TATLimit[k] = uint32(lim)
				snap.TATInterval[k] = sh.tat.intervalOf(w, &s.tags)
			}
			return true
		})
		shardBits := uint64(i) << s.shift
		sh.win.all(0, func(j int) bool {
			if w := sh.win.period(j, &s.periods); s.winExpiry(&sh.win, j) > now {
				k := sh.win.a.slots[j].w&lowMask | shardBits
				snap.Win[k] = snapWin{sh.win.window(j), w, uint32(sh.win.limit(j))}
			}
			return true
		})
		sh.logs.all(0, func(j int) bool {
			var buf [1]slidinglog.Entry
			entries, used := sh.logs.logEntries(j, &buf)
			w := sh.logs.period(j, &s.periods)
			if exp := slidinglog.Expiry(entries, time.Duration(w)); exp > now {
				k := sh.logs.a.slots[j].w&lowMask | shardBits
				snap.Logs[k] = snapLog{append([]slidinglog.Entry(nil), entries...), exp, int64(sh.logs.limit(j).rate()), w, used}
			}
			return true
		})
		sh.mu.Unlock()
	}
	if err := gob.NewEncoder(w).Encode(&snap); err != nil {
		return 0, fmt.Errorf("memstore: write snapshot: %w", err)
	}
	return gen, nil
}

// ErrNotEmpty is returned by Restore when the store already holds keys.
var ErrNotEmpty = errors.New("memstore: restore into a store that holds keys")

// ErrSnapshotVersion is wrapped by the error Restore returns for a snapshot
// written by another version of the store. Its keys are stored as hashes
// made by that version's key hash, which this one does not compute, so they
// cannot be matched to their keys again: the state is lost and the store
// starts empty.
var ErrSnapshotVersion = errors.New("memstore: snapshot of another version")

// Restore reads a snapshot written by Snapshot into s, which must hold no
// keys yet (restore before serving): s adopts the snapshot's key hash so the
// same keys find their state. Keys that have decayed since the snapshot are
// skipped. A malformed snapshot is an error and changes nothing; so is one
// of another version (ErrSnapshotVersion): versions before 4 hashed keys in
// a way an attacker could collide, and their hashes cannot be converted.
// A version 4 snapshot is read (its bucket keys' interval unknown).
func (s *Store) Restore(r io.Reader) error {
	var snap snapshot
	if err := gob.NewDecoder(r).Decode(&snap); err != nil {
		return fmt.Errorf("memstore: read snapshot: %w", err)
	}
	if snap.Version < oldestSnapshot || snap.Version > snapshotVersion {
		return fmt.Errorf("%w: version %d, want %d to %d (its keys were hashed differently)", ErrSnapshotVersion, snap.Version, oldestSnapshot, snapshotVersion)
	}
	if s.Len() != 0 {
		return ErrNotEmpty
	}
	if err := snap.check(); err != nil {
		return fmt.Errorf("memstore: read snapshot: %w", err)
	}
	s.hash = keyHashOf(snap.K0, snap.K1)
	s.snapGen = snap.Journal
	now := s.clock()
	// Keys go in as new keys do: past MaxKeys (a store restarted with a
	// smaller bound) the cheapest are dropped first, and what cannot fit
	// without dropping valuable state is left out (counted as refusals).
	for k, v := range snap.TAT {
		if v > now {
			lim := tatLimit(snap.TATLimit[k])
			iv := snap.TATInterval[k] // 0 from version 4: unknown
			k = nonzero(k)            // as sum maps it
			sh := s.shardOf(k)
			sh.mu.Lock()
			if e, _ := sh.tat.lookupKey(k, &s.tags); e != nil {
				e.tat.Store(max(e.tat.Load(), v)) // the store is not serving yet
			} else if s.makeRoom(sh, k, now) {
				sh.tat.insert(tatWord(k, s.tags.tag(iv)), v, lim, iv)
			}
			sh.mu.Unlock()
		}
	}
	for k, v := range snap.Win {
		s.putWin(k, v, now)
	}
	for k, v := range snap.Logs {
		if slidinglog.Expiry(v.Log, time.Duration(v.Period)) > now {
			k = nonzero(k)
			sh := s.shardOf(k)
			sh.mu.Lock()
			i := sh.logs.find(k)
			if i >= 0 {
				sh.logs.remove(i) // the same hash twice: the last one read
			}
			if s.makeRoom(sh, k, now) {
				i = sh.logs.insert(k, s.periods.tag(v.Period), v.Period)
				sh.logs.setLog(i, v.Log, v.Used, packWinLimit(v.Rate, false), nil)
			}
			sh.mu.Unlock()
		}
	}
	return nil
}

// check reports what is malformed in snap, whose version is current.
func (snap *snapshot) check() error {
	if snap.K0&1 == 0 || snap.K1&1 == 0 {
		return errors.New("malformed key hash")
	}
	for k := range snap.TAT {
		if !tatLimit(snap.TATLimit[k]).valid() {
			return fmt.Errorf("key %#x: malformed limit", k)
		}
		if iv := snap.TATInterval[k]; iv < 0 || iv > int64(ratelimit.MaxPeriod) {
			return fmt.Errorf("key %#x: malformed interval", k)
		}
	}
	for k, v := range snap.Win {
		if !winLimit(v.Limit).valid() || v.Period <= 0 || v.Period > int64(ratelimit.MaxWindow) ||
			v.State.Prev < 0 || v.State.Prev > ratelimit.MaxRate || v.State.Curr < 0 || v.State.Curr > ratelimit.MaxRate {
			return fmt.Errorf("key %#x: malformed window", k)
		}
	}
	for k, v := range snap.Logs {
		if v.Period <= 0 || v.Rate <= 0 || v.Rate > ratelimit.MaxRate {
			return fmt.Errorf("key %#x: malformed log limit", k)
		}
	}
	return nil
}

// putWin sets the window key hashed to k to v at now, as Restore and the
// journal's replay read them: a state that has decayed drops the key; a
// new key goes in as new keys do (see Restore). Only before serving.
func (s *Store) putWin(k uint64, v snapWin, now int64) {
	lim := winLimit(v.Limit)
	k = nonzero(k)
	sh := s.shardOf(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := sh.win.find(k)
	if v.State.Expiry(lim.sliding(), time.Duration(v.Period)) <= now {
		if i >= 0 {
			sh.win.remove(i)
		}
		return
	}
	tag := s.periods.tag(v.Period)
	switch {
	case i >= 0:
		s.retag(&sh.win, i, tag, v.Period)
	case s.makeRoom(sh, k, now):
		i = sh.win.insert(k, tag, v.Period)
	default:
		return
	}
	sh.win.setWindow(i, v.State, lim)
}
