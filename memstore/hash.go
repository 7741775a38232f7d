package memstore

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
)

// keyHash maps keys to 64-bit identifiers with a secret drawn per store, so
// the store holds 8 bytes per key instead of the key string (about 40 fewer
// bytes a key at a million keys) and never keeps identifying keys (IP
// addresses, user IDs) in memory in plain text.
//
// Two distinct keys share state only if their hashes collide: about one
// chance in 2^64/n² for n keys (1 in 3·10^7 at a million keys), and an
// attacker cannot aim for a collision without the secret. That needs every
// mixing step to depend on the secret: each multiplication takes two
// operands with a secret word XORed into both (as wyhash does with its
// seeded secret), so no key bytes, whatever their value, can zero an
// operand and erase what was mixed before. (Until snapshot version 4 the
// key words were XORed with public constants before the multiplication, so
// a word equal to one, reachable through percent-encoded bytes in a path,
// zeroed the product and made keys collide for every secret.)
//
// The secret is k0 and k1; seed is derived from them. The secret is written
// with a snapshot so a restored store hashes keys as before.
type keyHash struct{ k0, k1, seed uint64 }

func newKeyHash() keyHash {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms (Go 1.24+).
		panic("memstore: no randomness: " + err.Error())
	}
	return keyHashOf(binary.LittleEndian.Uint64(b[:8])|1, binary.LittleEndian.Uint64(b[8:])|1)
}

// keyHashOf returns the key hash of the secret k0, k1 (both odd).
func keyHashOf(k0, k1 uint64) keyHash {
	return keyHash{k0: k0, k1: k1, seed: mix(k0^0x9e3779b97f4a7c15, k1^0xbf58476d1ce4e5b9) ^ k0}
}

// mix is the 128-bit multiply folded to 64 bits (the mixing step of
// wyhash and of Go's runtime fallback hash).
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// sum returns the hash of s, never 0 or 1 (tatTable's empty slot and
// tombstone).
//
// Keys are short (an IP address, a user ID, a route and an API key), so sum
// reads up to 16 bytes as two overlapping words and mixes them in one
// multiplication, and folds longer keys 16 bytes a multiplication: on the
// hot path the hash is the first link of a dependent chain (hash, slot
// address, cache miss), so its latency counts more than its throughput.
// A short key costs two dependent multiplications.
//
// Every multiplication's operands are XORed with secret words (k1 and the
// running seed, then k0 and k1), wyhash's final construction: an operand
// is zero only for a word equal to a secret.
func (h keyHash) sum(s string) uint64 {
	n := len(s)
	seed := h.seed
	var a, b uint64
	switch {
	case n > 16:
		for t := s; len(t) > 16; t = t[16:] {
			seed = mix(le64(t)^h.k1, le64(t[8:])^seed)
		}
		a, b = le64(s[n-16:]), le64(s[n-8:])
	case n >= 8:
		a, b = le64(s), le64(s[n-8:])
	case n >= 4:
		a, b = uint64(le32(s)), uint64(le32(s[n-4:]))
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	// The full 128-bit product, both halves mixed again with the secret
	// and the length.
	hi, lo := bits.Mul64(a^h.k1, b^seed)
	return nonzero(mix(lo^h.k0^uint64(n), hi^h.k1))
}

// nonzero maps 0 and 1 to 2 and 3 and leaves every other hash alone.
func nonzero(h uint64) uint64 {
	if h < 2 {
		return h + 2
	}
	return h
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}
