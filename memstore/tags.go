package memstore

import (
	"sync"
	"sync/atomic"
)

// intervalTags numbers the emission intervals (gcra.Params.T) a store's
// bucket keys are used with, 1 to maxTag, so that a bucket slot says which
// interval its state was made under in 8 bits of its hash word (tatWord)
// instead of an 8-byte field: the slot stays 16 bytes, four to a cache
// line. A request under another interval than its key's state was made
// under finds no slot on the lock-free path (the words differ) and
// converts the state under the lock.
//
// A number, once given, is never taken back, so the lock-free path can
// trust the tag it finds: a slot's word never changes, and neither does
// what its tag means. Callers apply few distinct intervals (a gateway's
// rules: a few dozen); past maxTag of them, new intervals share
// tagOverflow, whose slots keep their interval in their table's ovf map
// and are always decided under the shard's lock: slower, never wrong.
type intervalTags struct {
	mu  sync.Mutex // serialises registration
	n   atomic.Int32
	ivs [maxTag + 1]atomic.Int64 // ivs[tag], for tag 1..n
}

const (
	maxTag      = 254
	tagOverflow = 255

	tagShift = 56
	lowMask  = 1<<tagShift - 1
)

// tatWord is the word a bucket key hashed to h is held under in its
// shard's table when its state was made under the interval tagged tag: h's
// low 56 bits and the tag in the top 8. The top bits of h choose the shard
// (Store.shardOf), so in a store of 256 shards or more every key of a shard
// has the same top 8 bits and the word loses nothing of the hash; with
// fewer shards (a store of fewer than 4096 keys, or Options.Shards), keys
// are told apart by 56 bits plus the shard's. A word is never empty or
// tomb: its tag is at least 1.
func tatWord(h uint64, tag uint8) uint64 { return h&lowMask | uint64(tag)<<tagShift }

func wordTag(w uint64) uint8 { return uint8(w >> tagShift) }

// tag returns iv's tag, numbering it if it is new and numbers remain.
func (t *intervalTags) tag(iv int64) uint8 {
	if tag, ok := t.find(iv); ok {
		return tag
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if tag, ok := t.find(iv); ok {
		return tag
	}
	n := t.n.Load()
	if n == maxTag {
		return tagOverflow
	}
	t.ivs[n+1].Store(iv)
	t.n.Store(n + 1) // publishes ivs[n+1]
	return uint8(n + 1)
}

func (t *intervalTags) find(iv int64) (uint8, bool) {
	n := t.n.Load()
	for i := int32(1); i <= n; i++ {
		if t.ivs[i].Load() == iv {
			return uint8(i), true
		}
	}
	return 0, false
}

// interval returns the interval of tag, which is not tagOverflow.
func (t *intervalTags) interval(tag uint8) int64 { return t.ivs[tag].Load() }
