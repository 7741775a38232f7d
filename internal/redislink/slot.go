package redislink

import "sync"

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag (the text between the first "{" and the next "}", when not
// empty) or of the whole key, modulo 16384.
func Slot(key string) uint16 {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return crc16(key) & 16383
			}
		}
		break
	}
	return crc16(key) & 16383
}

var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c = c<<8 ^ crcTable[byte(c>>8)^s[i]]
	}
	return c
}

// tagAlphabet spells SlotTag's tags: no brace, nothing a shell or a log
// would quote.
const tagAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_"

// slotTags holds, for each slot, the shortest tag of tagAlphabet (the
// first in the alphabet's order) whose CRC16 lands in it: three
// characters for every slot but a few, which take four.
var slotTags = sync.OnceValue(func() *[16384]string {
	var t [16384]string
	left := len(t)
	var b [4]byte
	for n := 1; n <= 4 && left > 0; n++ {
		var fill func(i int)
		fill = func(i int) {
			if left == 0 {
				return
			}
			if i == n {
				s := crc16(string(b[:n])) & 16383
				if t[s] == "" {
					t[s] = string(b[:n])
					left--
				}
				return
			}
			for j := 0; j < len(tagAlphabet); j++ {
				b[i] = tagAlphabet[j]
				fill(i + 1)
			}
		}
		fill(0)
	}
	return &t
})

// SlotTag returns a short hash tag's text (no braces) that Redis Cluster
// hashes to slot (mod 16384): the same for every process, so that a key
// named Prefix + "{" + SlotTag(s) + "}" + anything lives in slot s.
func SlotTag(slot uint16) string { return slotTags()[slot&16383] }

// TagSlot returns the slot of a key whose hash tag is tag (not empty,
// without "}").
func TagSlot(tag string) uint16 { return crc16(tag) & 16383 }
