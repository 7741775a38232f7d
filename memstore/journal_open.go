package memstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sluicehq/sluice/algorithm/window"
	"github.com/sluicehq/sluice/ratelimit"
)

// ErrJournalOpen is returned by OpenJournal on a store that has one open.
var ErrJournalOpen = errors.New("memstore: a journal is open already")

// OpenJournal replays the journal at path into s and keeps recording to
// it: every change to a fixed-window or sliding-window-counter key whose
// period is at least opts.MinPeriod (calendar quotas are fixed windows),
// buffered in memory and written and synced every opts.Interval by a
// goroutine that Close stops (after a last write). A crash loses at most
// the changes of one interval. Call it before serving, after Restore of
// the snapshot SaveSnapshot wrote, which records where in the journal it
// stands: the records after that point are applied, each setting its key
// to the state it holds. Bucket keys (GCRA, token and leaky bucket) and
// sliding logs are not journaled: a crash loses their changes since the
// last snapshot.
//
// A file that does not exist is created. A last record cut short (the
// crash the journal is for) is dropped, and the file cut back to the
// whole records (JournalReplay.Torn says so). A file that cannot be read
// past some point (a header that is not a journal's, a damaged record
// with more after it, a secret that is not the restored snapshot's) is a
// *JournalError (ErrJournalDamaged) naming the file and the offset: the
// whole records before it are applied, the file is left untouched and no
// journal is opened.
func (s *Store) OpenJournal(path string, opts JournalOptions) (JournalReplay, error) {
	var rep JournalReplay
	if s.jr.Load() != nil {
		return rep, ErrJournalOpen
	}
	if s.closed.Load() {
		return rep, ratelimit.ErrClosed
	}
	j := newJournal(s, path, opts)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		err = j.create(s)
	case err == nil:
		j.f = f
		rep, err = j.replay(s)
		if err != nil {
			f.Close()
		}
	default:
		err = fmt.Errorf("memstore: journal: %w", err)
	}
	if err != nil {
		return rep, err
	}
	s.jr.Store(j)
	interval := opts.Interval
	if interval <= 0 {
		interval = DefaultJournalInterval
	}
	s.every(interval, func(time.Time) { j.flush(s) })
	return rep, nil
}

func newJournal(s *Store, path string, opts JournalOptions) *journal {
	j := &journal{path: path, minPeriod: int64(opts.MinPeriod), log: opts.Logger, bufs: make([]jbuf, len(s.shards))}
	if j.minPeriod <= 0 {
		j.minPeriod = int64(DefaultJournalMinPeriod)
	}
	total := opts.MaxBuffer
	if total <= 0 {
		total = DefaultJournalBuffer
	}
	// Chunks of whole window records, about 4 KiB, or a quarter of a
	// shard's share of a small buffer.
	frame := maxRecLen + frameLen
	j.chunk = int64(frame * min(max(total/len(s.shards)/4/frame, 1), 4096/frame))
	j.budget.Store(int64(total))
	if j.log == nil {
		j.log = slog.New(slog.DiscardHandler)
	}
	return j
}

// create writes a new journal at j.path: the header and a mark of the
// restored snapshot's generation (or 1), through a temporary file and a
// rename, and opens it.
func (j *journal) create(s *Store) error {
	j.secret = [2]uint64{s.hash.k0, s.hash.k1}
	j.gen = max(s.snapGen, 1)
	b := appendFrame(journalHeader(j.secret[0], j.secret[1]), markPayload(j.gen))
	tmp := j.path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		_, err = f.Write(b)
		if err == nil {
			err = f.Sync()
		}
		if err == nil {
			err = os.Rename(tmp, j.path)
		}
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}
	if err != nil {
		return fmt.Errorf("memstore: journal %s: create: %w", j.path, err)
	}
	syncDir(j.path)
	j.f, j.size, j.markOff = f, int64(len(b)), headerLen
	return nil
}

// A journalScan is what reading a journal found.
type journalScan struct {
	k0, k1 uint64
	marks  []journalMark
	end    int64 // where the whole, valid records end
	torn   bool  // the bytes from end on are a last record cut short
	bad    *JournalError
}

type journalMark struct {
	gen uint64
	off int64
}

// errTorn is a frame cut short by the end of the file.
var errTorn = errors.New("torn")

// journalReader reads a journal's frames.
type journalReader struct {
	r   *bufio.Reader
	off int64 // where the next frame begins
	buf [maxRecLen + frameLen]byte
}

// header reads and checks the header, returning the secret.
func (jr *journalReader) header() (k0, k1 uint64, reason string) {
	var h [headerLen]byte
	if _, err := io.ReadFull(jr.r, h[:]); err != nil {
		return 0, 0, "not a sluice journal: shorter than its header"
	}
	jr.off = headerLen
	switch {
	case string(h[:8]) != journalMagic:
		return 0, 0, "not a sluice journal: wrong magic"
	case crc32.Checksum(h[:headerLen-4], castagnoli) != binary.LittleEndian.Uint32(h[headerLen-4:]):
		return 0, 0, "header checksum mismatch"
	case binary.LittleEndian.Uint32(h[8:]) != journalVersion:
		return 0, 0, fmt.Sprintf("journal version %d, want %d", binary.LittleEndian.Uint32(h[8:]), journalVersion)
	}
	k0, k1 = binary.LittleEndian.Uint64(h[12:]), binary.LittleEndian.Uint64(h[20:])
	if k0&1 == 0 || k1&1 == 0 {
		return 0, 0, "malformed key hash secret"
	}
	return k0, k1, ""
}

// next returns the next frame's payload: io.EOF at the end of the file,
// errTorn for a last frame cut short or damaged (nothing after it), or
// another error naming what is wrong with a frame that has more after it.
func (jr *journalReader) next() ([]byte, error) {
	n, err := io.ReadFull(jr.r, jr.buf[:4])
	switch {
	case n == 0 && err == io.EOF:
		return nil, io.EOF
	case err != nil:
		return nil, errTorn
	}
	l := int(binary.LittleEndian.Uint32(jr.buf[:4]))
	if l == 0 || l > maxRecLen {
		if jr.restIsZero() {
			return nil, errTorn // a tail of zeros: blocks allocated, never written
		}
		return nil, fmt.Errorf("record length %d, want 1 to %d", l, maxRecLen)
	}
	if _, err := io.ReadFull(jr.r, jr.buf[4:4+l+4]); err != nil {
		return nil, errTorn
	}
	p := jr.buf[4 : 4+l]
	if crc32.Checksum(jr.buf[:4+l], castagnoli) != binary.LittleEndian.Uint32(jr.buf[4+l:]) {
		if _, err := jr.r.Peek(1); err == io.EOF {
			return nil, errTorn // the last frame, written in part
		}
		return nil, errors.New("record checksum mismatch")
	}
	if reason := checkRecord(p); reason != "" {
		return nil, errors.New(reason)
	}
	jr.off += int64(frameLen + l)
	return p, nil
}

// restIsZero reports whether every byte left to read is zero.
func (jr *journalReader) restIsZero() bool {
	for {
		b, err := jr.r.ReadByte()
		if err != nil {
			return true
		}
		if b != 0 {
			return false
		}
	}
}

// checkRecord returns what is malformed in the checksummed payload p, or
// "".
func checkRecord(p []byte) string {
	switch {
	case p[0] == recMark && len(p) == markLen:
		if binary.LittleEndian.Uint64(p[1:]) == 0 {
			return "mark of generation 0"
		}
	case p[0] == recDelete && len(p) == deleteLen:
	case p[0] == recWindow && len(p) == windowLen:
		w, lim, st := windowRecord(p)
		if !lim.valid() || w <= 0 || w > int64(ratelimit.MaxWindow) ||
			st.Prev < 0 || st.Prev > ratelimit.MaxRate || st.Curr < 0 || st.Curr > ratelimit.MaxRate {
			return "malformed window record"
		}
	default:
		return fmt.Sprintf("unknown record type %d of %d bytes", p[0], len(p))
	}
	return ""
}

// windowRecord decodes a recWindow payload.
func windowRecord(p []byte) (w int64, lim winLimit, st window.State) {
	w = int64(binary.LittleEndian.Uint64(p[9:]))
	lim = winLimit(binary.LittleEndian.Uint32(p[17:]))
	st = window.State{Start: int64(binary.LittleEndian.Uint64(p[21:])),
		Prev: int64(binary.LittleEndian.Uint64(p[29:])), Curr: int64(binary.LittleEndian.Uint64(p[37:]))}
	return w, lim, st
}

// scanJournal reads a whole journal from r: its secret, its marks, and
// where its whole records end and why.
func scanJournal(path string, r io.Reader) journalScan {
	jr := journalReader{r: bufio.NewReaderSize(r, 64<<10)}
	var sc journalScan
	var reason string
	if sc.k0, sc.k1, reason = jr.header(); reason != "" {
		sc.bad = &JournalError{Path: path, Offset: 0, Reason: reason}
		return sc
	}
	for {
		p, err := jr.next()
		switch {
		case err == io.EOF:
		case err == errTorn:
			sc.torn = true
		case err != nil:
			sc.bad = &JournalError{Path: path, Offset: jr.off, Reason: err.Error() +
				"; the records from there on are not replayed and the file is kept as it is"}
		case p[0] == recMark:
			gen := binary.LittleEndian.Uint64(p[1:])
			at := jr.off - int64(frameLen+len(p))
			if n := len(sc.marks); n > 0 && gen <= sc.marks[n-1].gen {
				sc.bad = &JournalError{Path: path, Offset: at,
					Reason: fmt.Sprintf("mark of generation %d after %d", gen, sc.marks[n-1].gen)}
				sc.end = at
				return sc
			}
			sc.marks = append(sc.marks, journalMark{gen, at})
			continue
		default:
			continue
		}
		sc.end = jr.off
		return sc
	}
}

// from returns where replay starts for a snapshot of generation gen (0:
// none restored): at the mark of gen; at the start when every mark is
// newer (the snapshot is older than the journal) or gen is 0; at the end
// when every mark is older (the journal's records are all in the
// snapshot: stale).
func (sc *journalScan) from(gen uint64) (off int64, stale bool) {
	if gen == 0 || len(sc.marks) == 0 || sc.marks[0].gen > gen {
		return headerLen, false
	}
	for _, m := range sc.marks {
		if m.gen == gen {
			return m.off, false
		}
	}
	if sc.marks[len(sc.marks)-1].gen < gen {
		return sc.end, true
	}
	return headerLen, false // a gap around gen: replay it all
}

// replay applies the journal open in j.f to s (see OpenJournal) and
// readies j to append to it.
func (j *journal) replay(s *Store) (JournalReplay, error) {
	var rep JournalReplay
	sc := scanJournal(j.path, io.NewSectionReader(j.f, 0, 1<<62))
	if sc.bad != nil && sc.bad.Offset == 0 {
		return rep, sc.bad
	}
	switch {
	case s.snapGen == 0 && s.Len() == 0:
		s.hash = keyHashOf(sc.k0, sc.k1) // no snapshot restored: the journal's keys
	case sc.k0 != s.hash.k0 || sc.k1 != s.hash.k1:
		return rep, &JournalError{Path: j.path, Offset: 0,
			Reason: "its key-hash secret is not the restored snapshot's: it was written beside another snapshot"}
	}
	from, stale := sc.from(s.snapGen)
	if err := j.apply(s, from, sc.end, &rep); err != nil {
		return rep, err
	}
	if sc.bad != nil {
		return rep, sc.bad
	}
	if stale {
		// Every record is in the snapshot: start the file afresh.
		j.f.Close()
		return rep, j.create(s)
	}
	j.secret = [2]uint64{sc.k0, sc.k1}
	if sc.torn {
		fi, err := j.f.Stat()
		if err == nil {
			rep.Torn, rep.TornAt = fi.Size()-sc.end, sc.end
			err = j.f.Truncate(sc.end)
		}
		if err != nil {
			return rep, fmt.Errorf("memstore: journal %s: cut its torn last record: %w", j.path, err)
		}
	}
	j.size = sc.end
	if n := len(sc.marks); n > 0 {
		j.gen, j.markOff = sc.marks[n-1].gen, sc.marks[n-1].off
		return rep, nil
	}
	// No mark survived (cut short right after the header): write one.
	j.gen = max(s.snapGen, 1)
	j.out = appendFrame(j.out[:0], markPayload(j.gen))
	j.markOff = j.size
	return rep, j.write()
}

// apply applies the records of j.f in [from, end) to s, counting those
// before from as skipped.
func (j *journal) apply(s *Store, from, end int64, rep *JournalReplay) error {
	jr := journalReader{r: bufio.NewReaderSize(io.NewSectionReader(j.f, headerLen, end-headerLen), 64<<10), off: headerLen}
	now := s.clock()
	for jr.off < end {
		at := jr.off
		p, err := jr.next()
		if err != nil {
			return fmt.Errorf("memstore: journal %s: offset %d: changed while read: %v", j.path, at, err)
		}
		switch {
		case p[0] == recMark:
		case at < from:
			rep.Skipped++
		case p[0] == recDelete:
			s.forget(nonzero(binary.LittleEndian.Uint64(p[1:])), false)
			rep.Records++
		default:
			w, lim, st := windowRecord(p)
			s.putWin(binary.LittleEndian.Uint64(p[1:]), snapWin{State: st, Period: w, Limit: uint32(lim)}, now)
			rep.Records++
		}
	}
	return nil
}
