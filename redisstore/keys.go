package redisstore

import (
	"crypto/sha256"
	"encoding/base64"
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/ratelimit"
)

// Key names.
//
// A limiter key's state lives in Redis under a compact name of fixed size,
// whatever the key's length:
//
//	Prefix + shape + "{" + slot tag + "}" + hash
//
// where hash is the first 12 bytes (96 bits) of the key's SHA-256 in
// unpadded base64url (16 characters), and the slot tag is the short text
// (3 characters, 4 for a few slots; redislink.SlotTag) that Redis Cluster
// hashes to the slot the readable name Prefix + shape + "{" + key + "}"
// had: the slot of a key does not change with the layout, all the names of
// one key (every shape, the fixed window's marker and counters) share it,
// and a script can read a key's state under its old name in the same call.
// With the default prefix a name is 29 or 30 bytes, in redis-server's
// 32-byte allocation class, against 64 for a 50-byte rule key. Names are
// not reversible: Store.Key computes one from the readable key, which is
// how an operator finds a key's state (and Reset deletes it).
//
// SHA-256 rather than a faster hash: whoever picks the keys (an API
// caller's user ID, a header) must not be able to make two keys share a
// state, which would let one spend or reset another's budget. 96 bits
// take about 2^96 tries to hit a given key's name, and 100M live keys
// collide with a probability of about 6·10^-14.
//
// Upgrade: states written under the readable names (before this layout)
// are read until they expire: each script call carries the readable keys,
// and a script that finds no state under a request's compact names looks
// under its readable ones and renames what it finds (RENAME keeps the
// expiry; lua/legacy.lua); a fixed window's plain-command charge that
// finds one goes to the script. Only for legacyGrace and twice the life of
// the request's state after the store starts (readsLegacy). A key whose
// readable name hashed to another slot (one that starts with "}", or
// empty: its hash tag was empty) is not read under it (sameSlot).

// keyHashLen is the length of a compact name's hash part: 12 bytes in
// base64.
const keyHashLen = 16

// name returns the compact name of key's state of kind (a shape's tag, or
// "m" for the fixed window's marker).
func (s *Store) name(kind, key string) string {
	var buf [96]byte
	return string(s.appendName(buf[:0], kind, redislink.SlotTag(tagSlot(key)), sha256.Sum256([]byte(key))))
}

// appendName appends a compact name: prefix, kind, "{" + tag + "}", and
// the first 12 bytes of sum in base64url.
func (s *Store) appendName(b []byte, kind, tag string, sum [sha256.Size]byte) []byte {
	return base64.RawURLEncoding.AppendEncode(s.appendHead(b, kind, tag), sum[:12])
}

// appendHead appends what every name of kind in the slot of tag starts
// with: prefix, kind, "{" + tag + "}".
func (s *Store) appendHead(b []byte, kind, tag string) []byte {
	b = append(b, s.opts.Prefix...)
	b = append(b, kind...)
	b = append(b, '{')
	b = append(b, tag...)
	return append(b, '}')
}

// tagSlot returns the slot of the readable names, "…{" + key + "}": their
// hash tag is key up to its first "}". A key starting with "}" (or empty)
// had an empty tag, a slot for each name; its compact names go where the
// whole key hashes.
func tagSlot(key string) uint16 {
	if i := strings.IndexByte(key, '}'); i > 0 {
		key = key[:i]
	}
	return redislink.TagSlot(key)
}

// key returns the Redis key of key's state of shape sh.
func (s *Store) key(sh shape, key string) string { return s.name(shapeInfo[sh].tag, key) }

// readable returns the name the layout before compact names gave key's
// state of kind.
func (s *Store) readable(kind, key string) string { return s.opts.Prefix + kind + "{" + key + "}" }

// sameSlot reports whether key's readable names hash to its compact
// names' slot: not for a key starting with "}", or empty (its readable
// names had an empty hash tag, a slot each).
func sameSlot(key string) bool { return key != "" && key[0] != '}' }

// legacyKey returns readable(kind, key), or "" when that name is in
// another slot than the compact one (sameSlot).
func (s *Store) legacyKey(kind, key string) string {
	if !sameSlot(key) {
		return ""
	}
	return s.readable(kind, key)
}

// callNames sets c's Redis keys for key in shape sh: its state's, the
// marker's (the window shape), and, with legacy, the readable key for
// legacy.lua.
func (s *Store) callNames(c *call, sh shape, key string, legacy bool) {
	sum := sha256.Sum256([]byte(key))
	tag := redislink.SlotTag(tagSlot(key))
	var buf [96]byte
	if s.packs(sh) {
		// lua/packlegacy.lua reads the compact string name's state (and
		// a window's marker, the mkey).
		c.key, c.raw = string(s.appendPacked(buf[:0], shapeInfo[sh].tag, tag, sum)), ""
		if sh == shapeWindow {
			c.mkey = string(s.appendName(buf[:0], "m", tag, sum))
		}
		if legacy {
			c.raw = string(s.appendName(buf[:0], shapeInfo[sh].tag, tag, sum))
		}
		return
	}
	c.key = string(s.appendName(buf[:0], shapeInfo[sh].tag, tag, sum))
	if sh == shapeWindow {
		c.mkey = string(s.appendName(buf[:0], "m", tag, sum))
	}
	c.raw = ""
	if legacy && sameSlot(key) {
		c.raw = key
	}
}

// legacyGrace is how long after it starts a store looks for any state
// under readable names, beyond how long the state of the request's limit
// lasts: the time a fleet takes to upgrade, its older instances writing
// readable names meanwhile.
const legacyGrace = time.Hour

// readsLegacy reports whether a request under lim may find its state under
// readable names, or in a fixed window's marker form: within legacyGrace
// (or the compatibility window, writesMarkers, when longer) plus twice
// what a state of lim lasts (a window's two periods, a bucket's burst) of
// the store's start. A state an older version (or this one, in the
// marker form) wrote has decayed by then, as long as it wrote it under
// the same limit. Past it, requests carry no readable key and cost
// redis-server nothing more.
func (s *Store) readsLegacy(lim ratelimit.Limit) bool {
	const most = time.Duration(math.MaxInt64 / 4)
	life := lim.Period
	if iv := lim.Interval(); iv > 0 && lim.Burst > 0 {
		if lim.Burst > int64(most/iv) {
			return true
		}
		life = max(life, time.Duration(lim.Burst)*iv)
	}
	return life > most || time.Since(s.started) < max(legacyGrace, s.compatWindow())+2*life
}

// compatWindow is Options.CompatWindow as it applies: legacyGrace for 0,
// none for a negative one.
func (s *Store) compatWindow() time.Duration {
	switch w := s.opts.CompatWindow; {
	case w == 0:
		return legacyGrace
	case w < 0:
		return 0
	default:
		return w
	}
}

// writesMarkers reports whether the store still writes a fixed window on
// Redis's clock in the marker form of versions before the one key
// (Options.CompatWindow after its start), which those versions read:
// lone charges as those versions sent them (markerCharge) and window.lua
// as they wrote it. A state of it lasts a window, which readsLegacy
// covers: the one-key form's charges look for markers until then.
func (s *Store) writesMarkers() bool { return time.Since(s.started) < s.compatWindow() }

// Key returns the Redis key holding key's state under algorithm a (for a
// FixedWindow, its binary form or its integer count, which expires at its
// window's end; with Options.Now, MarkerKey names the key of its count),
// for inspection and for deleting a key's state (which resets its limit;
// Reset deletes every form). In the packed layout it is where the string
// layout kept the state, which the store reads for a while after a
// switch; Field names the packed state.
func (s *Store) Key(a ratelimit.Algorithm, key string) string { return s.key(shapeOf(a), key) }

// MarkerKey returns the Redis key of key's fixed-window marker, written
// with Options.Now (and on Redis's clock by versions before the integer
// count in Key's): it names the window of the integer count (its value,
// "period:start" in milliseconds) and that count's key, MarkerKey + ":" +
// its value.
func (s *Store) MarkerKey(key string) string { return s.markerKey(key) }

// markerKey returns the Redis key of key's fixed-window marker.
func (s *Store) markerKey(key string) string { return s.name("m", key) }
