// Package accesslog writes one JSON line per rate limit decision (or a
// sampled fraction of them), so that one caller's refusals can be found
// with grep: the gateway's and the RLS's access log.
//
//	{"time":"2026-12-01T22:40:00.123Z","server":"gateway","rule":"api","outcome":"denied","layer":"rate_limit","identity":"5f1c0e8a2b7d9c41","method":"GET","path":"/v1/items"}
//
// It is bounded three ways, whatever the request rate: at most
// Options.MaxPerSecond lines a second (further decisions are dropped and
// counted, Dropped), each value cut to eventlog.MaxKeyLen bytes (so a line
// is at most MaxLineBytes), and at most Buffer lines waiting for the
// writer. Log does not block: a line the writer goroutine cannot take at
// once is dropped and counted too, so a slow disk never slows a request.
//
// The identity is the decided key. By default it is hashed (HMAC-SHA-256
// under Options.Key, or a key drawn per process; 16 hex digits), the same
// key hashing the same in every line: grep for a key's hash finds its
// lines, and the log keeps no credential or address in the clear.
//
// A nil *Log logs nothing; servers keep it nil when the access log is off,
// so the request path pays one nil check.
package accesslog

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	mrand "math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/server/eventlog"
)

// Identity is how a line (or a span, internal/server/tracing) names the
// caller.
type Identity uint8

const (
	None   Identity = iota // no identity (the zero value: a record names no one unless configured)
	Hashed                 // HMAC of the key: stable across lines, not reversible (the access log's default, ParseIdentity)
	Clear                  // the key as is
)

// ParseIdentity parses hashed, clear or none ("" is hashed, the access
// log's default).
func ParseIdentity(s string) (Identity, error) { return ParseIdentityOr(s, Hashed) }

// ParseIdentityOr parses hashed, clear or none, and "" as empty: the one
// spelling of what a server's record (a log line, a span) says of the
// caller, whatever that record's default.
func ParseIdentityOr(s string, empty Identity) (Identity, error) {
	switch s {
	case "":
		return empty, nil
	case "hashed":
		return Hashed, nil
	case "clear":
		return Clear, nil
	case "none":
		return None, nil
	}
	return 0, fmt.Errorf("identity %q: want hashed, clear or none", s)
}

// Defaults and bounds.
const (
	DefaultMaxPerSecond = 1000
	// Buffer is the most lines waiting for the writer.
	Buffer = 1024
	// MaxLineBytes bounds a line: the fixed fields plus eight values of at
	// most eventlog.MaxKeyLen bytes each, JSON-escaped (6 bytes a byte at
	// worst, for control bytes).
	MaxLineBytes = 8*(6*eventlog.MaxKeyLen+len(eventlog.CutMarker)) + 256
)

// Outcomes of a decision.
const (
	Allowed      = "allowed"
	Denied       = "denied"
	ShadowDenied = "shadow_denied"
	StoreError   = "store_error"
)

// Options configures a Log.
type Options struct {
	// Writer receives the lines. Required.
	Writer io.Writer
	// Server names the server in every line: gateway or rls.
	Server string
	// Sample is the fraction of decisions logged, in (0, 1]. 0 means 1.
	Sample float64
	// RefusalsOnly leaves allowed decisions out.
	RefusalsOnly bool
	// MaxPerSecond bounds the lines a second. 0 means DefaultMaxPerSecond.
	MaxPerSecond int
	// Identity is how the caller is named. The zero value is None;
	// servers default to Hashed (ParseIdentity).
	Identity Identity
	// Key is the hash key; nil draws one per process (so hashes are stable
	// within a process; configure one to keep them across restarts).
	Key []byte
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Entry is one decision.
type Entry struct {
	Rule     string // the rule (or policy) that decided
	Outcome  string // Allowed, Denied, ShadowDenied, StoreError
	Layer    string // the layer that decided (the gateway's: rate_limit, in_flight, shed, adaptive)
	Identity string // the decided key, hashed or not as configured
	// The gateway's request, or the RLS's domain and descriptor; empty
	// ones are left out.
	Method, Path, Domain, Descriptor string
}

// Log is an access log. Its methods are safe for concurrent use; the
// methods of a nil *Log do nothing.
type Log struct {
	opts      Options
	threshold uint64 // a decision is sampled when a random uint64 is below it; 0: all
	hasher    *Hasher
	lines     chan []byte
	done      chan struct{}
	dropped   atomic.Uint64

	mu     sync.Mutex
	sec    int64 // the second n counts in
	n      int
	closed bool
}

// New starts a Log writing to opts.Writer; Close stops it.
func New(opts Options) (*Log, error) {
	if opts.Writer == nil {
		return nil, errors.New("access log: no writer")
	}
	if opts.Sample < 0 || opts.Sample > 1 || opts.Sample != opts.Sample {
		return nil, fmt.Errorf("access log: sample %v is not in (0, 1]", opts.Sample)
	}
	if opts.MaxPerSecond < 0 {
		return nil, fmt.Errorf("access log: max per second %d is negative", opts.MaxPerSecond)
	}
	if opts.MaxPerSecond == 0 {
		opts.MaxPerSecond = DefaultMaxPerSecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	hasher, err := NewHasher(opts.Key)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	l := &Log{opts: opts, hasher: hasher, lines: make(chan []byte, Buffer), done: make(chan struct{})}
	if opts.Sample > 0 && opts.Sample < 1 {
		l.threshold = uint64(opts.Sample * (1 << 63))
		if l.threshold == 0 {
			l.threshold = 1
		}
	}
	go l.run()
	return l, nil
}

// Open returns the writer of path: "-" is standard error; any other path
// a file opened for appending (created 0600).
func Open(path string) (io.WriteCloser, error) {
	if path == "-" {
		return nopCloser{os.Stderr}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (l *Log) run() {
	defer close(l.done)
	for line := range l.lines {
		_, _ = l.opts.Writer.Write(line)
	}
}

// Close writes the lines waiting and stops the writer goroutine. Lines
// logged after Close are dropped.
func (l *Log) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.lines)
	}
	l.mu.Unlock()
	<-l.done
	return nil
}

// Dropped is the number of decisions not written for the bounds (the
// lines a second, the writer's buffer); sampled-out ones are not counted.
func (l *Log) Dropped() uint64 {
	if l == nil {
		return 0
	}
	return l.dropped.Load()
}

// Wants reports whether a decision of outcome would be considered at all
// (the log is on, and RefusalsOnly does not leave it out): callers check
// it before building an Entry.
func (l *Log) Wants(outcome string) bool {
	return l != nil && !(l.opts.RefusalsOnly && outcome == Allowed)
}

// Log writes e's line, unless it is sampled out, or over the lines a
// second or the writer's buffer (then it is counted in Dropped).
func (l *Log) Log(e Entry) {
	if !l.Wants(e.Outcome) {
		return
	}
	if l.threshold != 0 && mrand.Uint64()>>1 >= l.threshold {
		return
	}
	now := l.opts.Now()
	if !l.admit(now.Unix()) {
		l.dropped.Add(1)
		return
	}
	line := l.format(now, e)
	l.mu.Lock()
	sent := false
	if !l.closed {
		select {
		case l.lines <- line:
			sent = true
		default:
		}
	}
	l.mu.Unlock()
	if !sent {
		l.dropped.Add(1)
	}
}

// admit counts a line in second sec, reporting whether it is within
// MaxPerSecond.
func (l *Log) admit(sec int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sec != l.sec {
		l.sec, l.n = sec, 0
	}
	if l.n >= l.opts.MaxPerSecond {
		return false
	}
	l.n++
	return true
}

// format is e's line.
func (l *Log) format(now time.Time, e Entry) []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"time":"`...)
	b = now.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, '"')
	b = field(b, "server", l.opts.Server)
	b = field(b, "rule", e.Rule)
	b = field(b, "outcome", e.Outcome)
	b = field(b, "layer", e.Layer)
	switch l.opts.Identity {
	case Hashed:
		b = append(b, `,"identity":"`...)
		b = l.hasher.Append(b, e.Identity)
		b = append(b, '"')
	case Clear:
		b = field(b, "identity", e.Identity)
	}
	b = field(b, "method", e.Method)
	b = field(b, "path", e.Path)
	b = field(b, "domain", e.Domain)
	b = field(b, "descriptor", e.Descriptor)
	return append(b, "}\n"...)
}

// Hasher names a caller by the HMAC-SHA-256 of its key under a secret:
// the same key the same name, which does not give the key back. The
// access log's and the spans' (internal/server/tracing) identities are
// one Hasher's, so that a hash found in one is found in the other. It is
// safe for concurrent use.
type Hasher struct{ macs sync.Pool }

// HashLen is the length of a hashed identity: 8 bytes of the HMAC, in hex.
const HashLen = 16

// NewHasher returns a Hasher under key; a nil key draws 32 random bytes
// (hashes stable within the process only).
func NewHasher(key []byte) (*Hasher, error) {
	if key == nil {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("hash key: %w", err)
		}
	}
	h := &Hasher{}
	h.macs.New = func() any { return hmac.New(sha256.New, key) }
	return h, nil
}

// MinKeyLen is the shortest hash key LoadKey takes.
const MinKeyLen = 16

// LoadKey reads a hash key from file: its first line, without the spaces
// around it, at least MinKeyLen bytes. Configured, the same caller has
// the same hash across restarts and across a fleet's instances (a key
// drawn per process changes at every start). "" returns nil: a key drawn
// per process.
func LoadKey(file string) ([]byte, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("access log: hash key: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	key := strings.TrimSpace(line)
	if len(key) < MinKeyLen {
		return nil, fmt.Errorf("access log: hash key in %s is %d bytes; want at least %d", file, len(key), MinKeyLen)
	}
	return []byte(key), nil
}

// Append appends the first 8 bytes of the HMAC of id, in hex.
func (h *Hasher) Append(b []byte, id string) []byte {
	m := h.macs.Get().(hash.Hash)
	m.Reset()
	_, _ = io.WriteString(m, id)
	var sum [sha256.Size]byte
	m.Sum(sum[:0])
	h.macs.Put(m)
	return hex.AppendEncode(b, sum[:8])
}

// Hasher is the log's identity hasher, for what else names the same
// callers (the spans); nil for a nil Log.
func (l *Log) Hasher() *Hasher {
	if l == nil {
		return nil
	}
	return l.hasher
}

// field appends ,"name":"value" with value cut (eventlog.Cut) and
// JSON-escaped; an empty value is left out.
func field(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":"`...)
	b = appendString(b, eventlog.Cut(value))
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendString appends s JSON-escaped, without quotes; invalid UTF-8
// becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return b
}
