package redisstore

import (
	"crypto/sha256"
	"fmt"
	"math/bits"
	"strings"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redislink"
	"github.com/sluicehq/sluice/ratelimit"
)

// Layout is how a store keeps limiters' states in Redis (Options.Layout).
type Layout uint8

const (
	// LayoutString, the default, keeps each limiter's state in a string
	// key of its own, under its compact name (Store.Key).
	LayoutString Layout = iota
	// LayoutPacked keeps the states of the buckets (GCRA, TokenBucket,
	// LeakyBucket) and the windows (FixedWindow, SlidingWindowCounter) as
	// fields of hashes, many limiters' in one hash, in a fifth to a third
	// of the memory (docs/redis.md); the sliding log keeps its string
	// keys. A fixed window's charges then always go to the script
	// (Options.ScriptOnly).
	LayoutPacked
)

// String returns "string" or "packed", as the store URL's layout takes
// them.
func (l Layout) String() string {
	if l == LayoutPacked {
		return "packed"
	}
	return "string"
}

// ParseLayout reads a Layout's name.
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "string", "":
		return LayoutString, nil
	case "packed":
		return LayoutPacked, nil
	}
	return 0, fmt.Errorf("redisstore: layout %q: want string or packed", s)
}

// DefaultPackedBuckets is the hashes per Cluster hash slot of the packed
// layout: 32,768 hashes in all, about 31 limiters each at a million
// limiters, so that up to about three million a hash stays under 128
// fields, which redis-server keeps as a listpack (its default
// hash-max-listpack-entries).
const DefaultPackedBuckets = 2

// MaxPackedBuckets bounds Options.PackedBuckets.
const MaxPackedBuckets = 64

// packedField is the size of a packed state's field: 8 bytes of the key's
// SHA-256, after the byte whose leading bits pick the hash.
const packedField = 8

// Packed layout: names.
//
// A limiter's state is the field F of the hash H, where, with sum the
// SHA-256 of the key (the same as its compact name's) and tag its slot
// tag:
//
//	H = Prefix + shape + "{" + tag + "}" + bucket
//	F = sum[1:9], 8 bytes
//
// bucket is the leading log2(PackedBuckets) bits of sum[0], as one base64url
// character ("" with one bucket). Two live keys in one hash share a state
// when their F are equal: among N limiters spread over B hashes, with
// probability about N²/(2B)·2^-64, 8·10^-13 for a million limiters in the
// default 32,768 hashes. A caller who chooses keys must find a key whose
// slot, bucket and F match a given key's: about 2^64 SHA-256s (the string
// layout's names take 2^96).

// packs reports whether the store keeps sh's states packed.
func (s *Store) packs(sh shape) bool { return sh != shapeLog && s.opts.Layout == LayoutPacked }

const base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// appendPacked appends the packed identity of a state, the hash's name
// followed by the field (what the scripts take as the key).
func (s *Store) appendPacked(b []byte, kind, tag string, sum [sha256.Size]byte) []byte {
	b = s.appendHead(b, kind, tag)
	if s.packBits > 0 {
		b = append(b, base64url[sum[0]>>(8-s.packBits)])
	}
	return append(b, sum[1:1+packedField]...)
}

// Field returns the hash and the field holding key's state under
// algorithm a in the packed layout; ok is false when the store keeps that
// state under a string key (Key), as in the string layout.
func (s *Store) Field(a ratelimit.Algorithm, key string) (hash, field string, ok bool) {
	sh := shapeOf(a)
	if !s.packs(sh) {
		return "", "", false
	}
	var buf [96]byte
	id := string(s.appendPacked(buf[:0], shapeInfo[sh].tag, redislink.SlotTag(tagSlot(key)), sha256.Sum256([]byte(key))))
	return id[:len(id)-packedField], id[len(id)-packedField:], true
}

// packedOptions checks and completes the packed layout's options, and
// returns log2 of the buckets.
func packedOptions(opts *Options) (uint8, error) {
	if opts.Layout > LayoutPacked {
		return 0, fmt.Errorf("redisstore: unknown layout %d", opts.Layout)
	}
	if opts.PackedBuckets == 0 {
		opts.PackedBuckets = DefaultPackedBuckets
	}
	n := opts.PackedBuckets
	if n < 1 || n > MaxPackedBuckets || n&(n-1) != 0 {
		return 0, fmt.Errorf("redisstore: PackedBuckets %d: want a power of two from 1 to %d", n, MaxPackedBuckets)
	}
	return uint8(bits.TrailingZeros(uint(n))), nil
}

// packedFiles are the script files of the shapes the packed layout packs.
var packedFiles = [numShapes][]string{
	shapeBucket: {"tat.lua", "packlegacy.lua", "batch.lua", "packed.lua", "gcra.lua"},
	shapeWindow: {"wdead.lua", "packlegacy.lua", "pairs.lua", "batch.lua", "packed.lua", "window.lua"},
}

// packedSources are the packed layout's scripts, per slot and per node
// (lua/node.lua), for the shapes it packs.
var packedSources, packedNodeSources = func() (out, node [numShapes]string) {
	for sh, files := range packedFiles {
		if files == nil {
			continue
		}
		parts := make([]string, len(files))
		for i, f := range files {
			parts[i] = luaFile(f)
		}
		out[sh] = strings.Join(parts, "\n")
		node[sh] = luaFile("node.lua") + "\n" + out[sh]
	}
	return out, node
}()

// usePacked makes the store's scripts the packed layout's, for the shapes
// it packs, and sends every fixed window to the script (the plain commands
// of fast.go keep string keys).
func (s *Store) usePacked() {
	if s.opts.Layout != LayoutPacked {
		return
	}
	s.opts.ScriptOnly = true
	for sh := range numShapes {
		if s.packs(sh) {
			s.scripts[sh] = rueidis.NewLuaScript(packedSources[sh])
			s.nodes.scripts[sh] = rueidis.NewLuaScript(packedNodeSources[sh])
		}
	}
}

// extraSources are the scripts a store loads beside every store's.
func (s *Store) extraSources(cluster bool) []string {
	if s.opts.Layout != LayoutPacked {
		return nil
	}
	var out []string
	for sh := range numShapes {
		if s.packs(sh) {
			out = append(out, packedSources[sh])
			if cluster {
				out = append(out, packedNodeSources[sh])
			}
		}
	}
	return out
}
