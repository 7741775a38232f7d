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
// attacker cannot aim for a collision without the secret. The secret is
// written with a snapshot so a restored store hashes keys as before.
type keyHash struct{ k0, k1 uint64 }

func newKeyHash() keyHash {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms (Go 1.24+).
		panic("memstore: no randomness: " + err.Error())
	}
	return keyHash{binary.LittleEndian.Uint64(b[:8]) | 1, binary.LittleEndian.Uint64(b[8:]) | 1}
}

// mix is the 128-bit multiply folded to 64 bits (the mixing step of
// wyhash and of Go's runtime fallback hash).
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

const (
	p0 = 0xa0761d6478bd642f
	p1 = 0xe7037ed1a0b428db
	p2 = 0x8ebc6af09c88c6e3
)

// sum returns the hash of s, never 0 (tatTable's empty slot).
func (h keyHash) sum(s string) uint64 {
	a := h.k0 ^ mix(uint64(len(s))^p0, h.k1)
	for len(s) >= 8 {
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		a = mix(a^w^p1, h.k1^bits.RotateLeft64(w, 29))
		s = s[8:]
	}
	var w uint64
	for i := 0; i < len(s); i++ {
		w |= uint64(s[i]) << (8 * i)
	}
	a = mix(a^w^p2, h.k1^p1)
	return nonzero(mix(a^h.k0, p0))
}

// nonzero maps 0 to 1 and leaves every other hash alone.
func nonzero(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}
