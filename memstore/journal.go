package memstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/algorithm/window"
)

// DefaultJournalInterval is how often a journal's records are written and
// synced to disk when JournalOptions.Interval is zero: a crash loses at
// most the charges of this long (plus the time a write and fsync take).
const DefaultJournalInterval = time.Second

// DefaultJournalMinPeriod is the shortest period of the keys a journal
// records when JournalOptions.MinPeriod is zero: an hour, the line the
// store draws between short state and long-period quotas (see
// Options.MaxKeys).
const DefaultJournalMinPeriod = time.Hour

// DefaultJournalBuffer is the most bytes of records a journal holds in
// memory between two writes when JournalOptions.MaxBuffer is zero: about
// 300 000 charges.
const DefaultJournalBuffer = 16 << 20

// JournalOptions configures Store.OpenJournal. The zero value is the
// default.
type JournalOptions struct {
	// Interval is how often the records buffered in memory are written to
	// the file and synced (fsync): the most a crash (SIGKILL, the OOM
	// killer, a node lost) loses. Zero means DefaultJournalInterval (1 s).
	Interval time.Duration
	// MinPeriod is the shortest period a key must have to be journaled.
	// Zero means DefaultJournalMinPeriod (1 h): calendar quotas, hourly
	// and daily windows are, per-second and per-minute limits are not (a
	// crash costs them at most their own short period).
	MinPeriod time.Duration
	// MaxBuffer bounds the bytes of records held in memory between two
	// writes (the shards take it in chunks of about 4 KiB, so one busy
	// shard may hold most of it). The journal's memory is at most about
	// three times MaxBuffer (the records, the slack of their growing
	// slices, the write buffer they are copied to) plus the 64 KiB a
	// shard's buffer may keep between writes. A record past it is dropped and
	// counted (Stats.JournalDropped): the key's next record, which holds
	// its whole state, makes up for it. Zero means DefaultJournalBuffer.
	MaxBuffer int
	// Logger receives write and sync failures. Nil discards them (they are
	// counted in Stats.JournalErrors).
	Logger *slog.Logger
}

// JournalReplay tells what OpenJournal found in an existing journal.
type JournalReplay struct {
	Records int   // records applied to the store
	Skipped int   // records already in the restored snapshot
	Torn    int64 // bytes of a last record cut short (a crash while writing), dropped
	TornAt  int64 // the offset where that record began
}

// ErrJournalDamaged is wrapped by the JournalError OpenJournal returns for
// a journal it cannot read whole.
var ErrJournalDamaged = errors.New("memstore: journal damaged")

// JournalError is a journal that cannot be read past Offset: a header that
// is not a journal's or not this version's, a record that fails its
// checksum with more after it, a key-hash secret that is not the restored
// snapshot's. OpenJournal returns it having applied the whole records
// before Offset, and leaves the file as it is.
type JournalError struct {
	Path   string
	Offset int64
	Reason string
}

func (e *JournalError) Error() string {
	return fmt.Sprintf("memstore: journal %s: offset %d: %s", e.Path, e.Offset, e.Reason)
}

func (e *JournalError) Unwrap() error { return ErrJournalDamaged }

// The journal's layout. A file is a header and then records, each framed
// as a 4-byte little-endian payload length, the payload, and a CRC-32C
// (Castagnoli) of the length and the payload. The header: the magic, the
// version, the key hash's secret (the journal holds keys as hashes, like
// a snapshot), and a CRC-32C of those.
//
// A payload is a record type and its fields, little-endian:
//
//	recMark   gen u64: the records after it are not in the snapshot of generation gen
//	recWindow hash u64, period i64, limit u32, start i64, prev i64, curr i64: the key's whole state
//	recDelete hash u64: the key was reset
const (
	journalMagic   = "sluicejr"
	journalVersion = 1
	headerLen      = 8 + 4 + 8 + 8 + 4

	recMark   = 1
	recWindow = 2
	recDelete = 3

	markLen   = 1 + 8
	windowLen = 1 + 8 + 8 + 4 + 8 + 8 + 8
	deleteLen = 1 + 8
	maxRecLen = windowLen
	frameLen  = 4 + 4 // length and checksum around a payload
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// keepBuffer is the most a shard's buffer keeps of its room between two
// writes; a larger one (a hot key's burst) is dropped, so that the
// buffers hold at most 64 KiB a shard when the burst is over.
const keepBuffer = 64 << 10

// journal is a Store's open journal: one buffer a shard, appended to under
// the shard's lock by the charges of journaled keys, and written to the
// file, then synced, by one goroutine every interval (flush). A record
// holds the key's whole state after the change, so replay sets each key to
// its last record: a record also in the snapshot changes nothing.
//
// Snapshots compact it: before a snapshot reads the shards, rotate writes
// out every buffer and a mark of a new generation, which the snapshot
// records; every record before the mark is in the snapshot (it was applied
// before the snapshot read its shard). Once the snapshot is on disk,
// compact rewrites the file from the mark on. Replay starts at the mark
// of the snapshot's generation, so a crash at any point between leaves a
// snapshot and a journal that agree.
type journal struct {
	path      string
	minPeriod int64
	chunk     int64 // bytes a shard takes from budget at a time
	log       *slog.Logger

	bufs []jbuf // one a shard, guarded by the shard's mu

	mu      sync.Mutex // guards the fields below, and the file
	f       *os.File
	size    int64  // bytes written and synced
	gen     uint64 // the generation of the last mark
	markOff int64  // where that mark begins
	out     []byte // the write buffer of a flush
	secret  [2]uint64

	// budget is the bytes of records the shards may still buffer
	// (MaxBuffer, less what they hold or have taken): a shard takes a
	// chunk at a time, so one hot shard may use all of it, and gather
	// gives back what it wrote out.
	budget atomic.Int64

	dropped, errs, records atomic.Uint64
}

// jbuf is a shard's buffer of records and the bytes it has taken from the
// budget and not used yet, padded to a cache line of its own.
type jbuf struct {
	b    []byte
	room int64
	_    [32]byte
}

// appendFrame appends a frame of payload p to b.
func appendFrame(b, p []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
	b = append(b, p...)
	c := crc32.Checksum(b[len(b)-len(p)-4:], castagnoli)
	return binary.LittleEndian.AppendUint32(b, c)
}

func markPayload(gen uint64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{recMark}, gen)
}

func journalHeader(k0, k1 uint64) []byte {
	b := append(make([]byte, 0, headerLen), journalMagic...)
	b = binary.LittleEndian.AppendUint32(b, journalVersion)
	b = binary.LittleEndian.AppendUint64(b, k0)
	b = binary.LittleEndian.AppendUint64(b, k1)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// window records the state st of the window key hashed to h (period w,
// limit lim) in shard i's buffer. Called with the shard's lock held.
func (j *journal) window(i int, h uint64, w int64, lim winLimit, st window.State) {
	var p [windowLen]byte
	p[0] = recWindow
	binary.LittleEndian.PutUint64(p[1:], h)
	binary.LittleEndian.PutUint64(p[9:], uint64(w))
	binary.LittleEndian.PutUint32(p[17:], uint32(lim))
	binary.LittleEndian.PutUint64(p[21:], uint64(st.Start))
	binary.LittleEndian.PutUint64(p[29:], uint64(st.Prev))
	binary.LittleEndian.PutUint64(p[37:], uint64(st.Curr))
	j.add(i, p[:])
}

// reset records that the key hashed to h was reset. Called with the
// shard's lock held.
func (j *journal) reset(i int, h uint64) {
	var p [deleteLen]byte
	p[0] = recDelete
	binary.LittleEndian.PutUint64(p[1:], h)
	j.add(i, p[:])
}

// add appends a record of payload p to shard i's buffer, or drops it when
// the buffer is full. Called with the shard's lock held.
func (j *journal) add(i int, p []byte) {
	b := &j.bufs[i]
	n := int64(len(p) + frameLen)
	for b.room < n {
		if j.budget.Add(-j.chunk) < 0 {
			j.budget.Add(j.chunk)
			j.dropped.Add(1)
			return
		}
		b.room += j.chunk
	}
	b.room -= n
	b.b = appendFrame(b.b, p)
	j.records.Add(1)
}

// journaled reports whether a window key of period w is journaled: the
// journal of s, or nil.
func (s *Store) journaled(w int64) *journal {
	if j := s.jr.Load(); j != nil && w >= j.minPeriod {
		return j
	}
	return nil
}

// gather moves every shard's buffered records to j.out, taking each
// shard's lock in turn. Called with j.mu held.
func (j *journal) gather(s *Store) {
	j.out = j.out[:0]
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if b := j.bufs[i].b; len(b) > 0 {
			j.out = append(j.out, b...)
			j.budget.Add(int64(len(b)))
			j.bufs[i].b = b[:0]
			if cap(b) > keepBuffer {
				j.bufs[i].b = nil // a burst's: give it back
			}
		}
		sh.mu.Unlock()
	}
}

// write appends j.out to the file and syncs it. A failed write is cut off
// again (so the file ends on a whole record), logged and counted: its
// records are lost. Called with j.mu held.
func (j *journal) write() error {
	if len(j.out) == 0 {
		return nil
	}
	_, err := j.f.WriteAt(j.out, j.size)
	if err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		j.f.Truncate(j.size)
		j.errs.Add(1)
		j.log.Error("memstore: journal write failed; its records are lost", "file", j.path, "err", err)
		return fmt.Errorf("memstore: journal %s: write: %w", j.path, err)
	}
	j.size += int64(len(j.out))
	return nil
}

// flush writes out every buffered record: the journal goroutine's tick.
func (j *journal) flush(s *Store) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.gather(s)
	j.write()
}

// rotate writes out every buffered record and a mark of the next
// generation, and returns it: the records before the mark are in a
// snapshot that reads the shards from now on.
func (j *journal) rotate(s *Store) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.gather(s)
	off := j.size + int64(len(j.out))
	j.out = appendFrame(j.out, markPayload(j.gen+1))
	if err := j.write(); err != nil {
		return 0, err
	}
	j.gen++
	j.markOff = off
	return j.gen, nil
}

// compact rewrites the file from the mark of generation gen on, once a
// snapshot of that generation is on disk: through a temporary file and a
// rename, so a crash leaves the old file or the new one.
func (j *journal) compact(gen uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if gen != j.gen || j.markOff == headerLen {
		return nil // rotated again since, or nothing before the mark
	}
	tmp, err := os.CreateTemp(filepath.Dir(j.path), filepath.Base(j.path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("memstore: journal %s: compact: %w", j.path, err)
	}
	_, err = tmp.Write(journalHeader(j.secret[0], j.secret[1]))
	if err == nil {
		_, err = io.Copy(tmp, io.NewSectionReader(j.f, j.markOff, j.size-j.markOff))
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), j.path)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("memstore: journal %s: compact: %w", j.path, err)
	}
	syncDir(j.path)
	j.f.Close()
	j.f = tmp
	j.size -= j.markOff - headerLen
	j.markOff = headerLen
	return nil
}

// close writes out what is buffered and closes the file. Called by
// Store.Close once nothing else runs.
func (j *journal) close(s *Store) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.gather(s)
	err := j.write()
	if e := j.f.Close(); err == nil && e != nil {
		err = fmt.Errorf("memstore: journal %s: %w", j.path, e)
	}
	return err
}

// syncDir syncs the directory of path, so that a rename in it is durable.
func syncDir(path string) {
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
}

// SaveSnapshot writes the store's state to the file at path, through a
// temporary file in its directory, a sync and a rename, so that a crash
// never leaves half a snapshot. With a journal open, the snapshot records
// the journal's position, and the journal is then compacted to what came
// after it.
func (s *Store) SaveSnapshot(path string) error {
	s.snapMu.Lock()
	defer s.snapMu.Unlock()
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("memstore: snapshot: %w", err)
	}
	gen, err := s.snapshot(f)
	if err == nil {
		err = f.Sync()
	}
	if e := f.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("memstore: snapshot: %w", err)
	}
	syncDir(path)
	if j := s.jr.Load(); j != nil {
		return j.compact(gen)
	}
	return nil
}
