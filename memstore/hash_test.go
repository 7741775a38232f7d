package memstore

import (
	"encoding/binary"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestHashEveryByteCounts flips every bit of keys of every length up to 64
// bytes (where the short, overlapping and looping paths of sum meet) and
// requires a different hash each time, never 0 or 1.
func TestHashEveryByteCounts(t *testing.T) {
	h := newKeyHash()
	base := strings.Repeat("sluice-rate-limit-key/0123456789abcdef", 2)
	for n := 0; n <= 64; n++ {
		key := base[:n]
		want := h.sum(key)
		if want < 2 {
			t.Fatalf("sum(%q) = %d, a reserved value", key, want)
		}
		for i := range n {
			for bit := range 8 {
				b := []byte(key)
				b[i] ^= 1 << bit
				if got := h.sum(string(b)); got == want {
					t.Errorf("len %d: flipping bit %d of byte %d leaves the hash at %#x", n, bit, i, got)
				}
			}
		}
		if n > 0 && h.sum(key[:n-1]) == want {
			t.Errorf("len %d: the key and its prefix hash alike", n)
		}
	}
}

// TestHashSecret checks that the secret decides the hash: the same key
// under two stores' secrets hashes apart.
func TestHashSecret(t *testing.T) {
	a, b := newKeyHash(), newKeyHash()
	same := 0
	for i := range 1000 {
		k := "10.0.0." + strconv.Itoa(i)
		if a.sum(k) == b.sum(k) {
			same++
		}
	}
	if same != 0 {
		t.Errorf("%d of 1000 keys hash alike under two secrets", same)
	}
}

// TestHashSpreads checks what the store relies on: sequential keys (user
// IDs, addresses) spread evenly over the low bits (the slot in a table)
// and bits 40–47 (the shard). It counts keys per bucket for 2^16 keys in
// 256 buckets and bounds the chi-square statistic far above what an even
// spread produces (mean 255, sd 22.6) and far below a skewed one.
func TestHashSpreads(t *testing.T) {
	h := newKeyHash()
	for _, shift := range []uint{0, 40} {
		for _, prefix := range []string{"user:", "10.1.", "", "tenant-42/route/v1/orders/"} {
			var counts [256]float64
			const keys = 1 << 16
			for i := range keys {
				counts[(h.sum(prefix+strconv.Itoa(i))>>shift)&255]++
			}
			chi := 0.0
			for _, c := range counts {
				d := c - keys/256
				chi += d * d / (keys / 256)
			}
			if chi > 400 {
				t.Errorf("prefix %q, bits %d–%d: chi-square %.0f over 255 degrees of freedom", prefix, shift, shift+7, chi)
			}
		}
	}
}

// oldSum is keyHash.sum as it was before snapshot version 4: the key words
// were XORed with public constants (p1, p2) before the multiplications, so
// a word equal to p1 zeroed a product whatever the secret.
func oldSum(k0, k1 uint64, s string) uint64 {
	const (
		p0 = 0xa0761d6478bd642f
		p1 = 0xe7037ed1a0b428db
		p2 = 0x8ebc6af09c88c6e3
	)
	n := len(s)
	seed := k0 ^ mix(uint64(n)^p0, k1)
	var a, b uint64
	switch {
	case n > 16:
		for t := s; len(t) > 16; t = t[16:] {
			seed = mix(le64(t)^p1, le64(t[8:])^seed)
		}
		a, b = le64(s[n-16:]), le64(s[n-8:])
	case n >= 8:
		a, b = le64(s), le64(s[n-8:])
	case n >= 4:
		a, b = uint64(le32(s)), uint64(le32(s[n-4:]))
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	a = mix(a^p1, b^seed)
	return nonzero(mix(a^k1, p2^uint64(n)))
}

// TestHashNoSecretFreeCollisions builds keys that collided under the old
// hash for every secret: a key whose 8-byte word at the right offset equals
// the old public constant p1 (the bytes of a percent-encoded path segment
// such as %DB%28%B4%A0%D1%7E%03%E7) zeroed a multiplication, erasing
// everything mixed before it (the caller's identity, in a storage key that
// starts with it). It checks that each pair collided under the old hash for
// several random secrets, and that no pair collides under the current one
// for the same secrets.
func TestHashNoSecretFreeCollisions(t *testing.T) {
	zero, err := url.PathUnescape("%DB%28%B4%A0%D1%7E%03%E7") // p1, little-endian
	if err != nil {
		t.Fatal(err)
	}
	if le64(zero) != 0xe7037ed1a0b428db {
		t.Fatalf("the decoded segment reads %#x", le64(zero))
	}
	pad := func(s string, n int) string { return s + strings.Repeat("/", n-len(s)) }
	pairs := []struct{ name, a, b string }{
		// 8–16 bytes: the first word is p1, the rest is forgotten.
		{"first word", zero + "/users/1", zero + "/orders/"},
		// Longer: the last 16 bytes start with p1, so the final hash depends
		// only on the length: two identities, one path.
		{"last 16 bytes", pad("rl|user=alice|GET ", 32) + zero + "/x/y/z/w", pad("rl|user=mallory|GET ", 32) + zero + "/x/y/z/w"},
		// A 16-byte block that starts with p1 resets the running seed: the
		// identity before it is forgotten, whatever follows.
		{"block", pad("user=alice", 16) + zero + "/api/v1/orders?page=2", pad("user=mallory", 16) + zero + "/api/v1/orders?page=2"},
	}
	rng := rand.New(rand.NewPCG(15, 10))
	for _, p := range pairs {
		if p.a == p.b || len(p.a) != len(p.b) {
			t.Fatalf("%s: want two distinct keys of one length", p.name)
		}
		for range 8 {
			h := keyHashOf(rng.Uint64()|1, rng.Uint64()|1)
			if oldSum(h.k0, h.k1, p.a) != oldSum(h.k0, h.k1, p.b) {
				t.Fatalf("%s: %q and %q did not collide under the old hash", p.name, p.a, p.b)
			}
			if got := h.sum(p.a); got == h.sum(p.b) {
				t.Errorf("%s: %q and %q both hash to %#x under secret %#x, %#x", p.name, p.a, p.b, got, h.k0, h.k1)
			}
		}
	}
}

// TestHashNoZeroingWord checks the property the old hash lacked for any key
// word: for random secrets, keys of every length up to 48 bytes whose words
// at every offset are set to each of a few candidate values (zero, all
// ones, and the old public constants) all hash apart from each other.
func TestHashNoZeroingWord(t *testing.T) {
	words := []uint64{0, ^uint64(0), 0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 4 {
		h := keyHashOf(rng.Uint64()|1, rng.Uint64()|1)
		for n := 8; n <= 48; n++ {
			seen := map[uint64]string{}
			for _, w := range words {
				for off := 0; off+8 <= n; off++ {
					for _, fill := range []byte{'a', 'b'} {
						b := []byte(strings.Repeat(string(fill), n))
						binary.LittleEndian.PutUint64(b[off:], w)
						k := string(b)
						sum := h.sum(k)
						if prev, ok := seen[sum]; ok && prev != k {
							t.Fatalf("len %d: %q and %q both hash to %#x", n, prev, k, sum)
						}
						seen[sum] = k
					}
				}
			}
		}
	}
}

// BenchmarkKeyHash measures sum on keys of typical lengths: an IPv4
// address, a user ID, a route with an API key.
func BenchmarkKeyHash(b *testing.B) {
	h := newKeyHash()
	for _, k := range []string{"10.1.2.3", "user:1234567", "tenant-42/route/v1/orders/ak_0123456789abcdef"} {
		b.Run(strconv.Itoa(len(k)), func(b *testing.B) {
			keys := make([]string, 64)
			for i := range keys {
				keys[i] = k[:len(k)-1] + string(rune('0'+i%10))
			}
			var x uint64
			i := 0
			for b.Loop() {
				x ^= h.sum(keys[i&63])
				i++
			}
			sink = x
		})
	}
}

var sink uint64
