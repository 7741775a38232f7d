package memstore

import (
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
