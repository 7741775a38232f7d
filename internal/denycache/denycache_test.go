package denycache

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

var lim = ratelimit.Limit{Rate: 10, Period: time.Minute, Burst: 10}

func key(s string) Key { return Key{s, lim, ratelimit.GCRA} }

// TestGetPut: a denial covers costs at least its own (any cost with
// anyCost) until its RetryAfter, counted down, and its ResetAfter too;
// then it expires.
func TestGetPut(t *testing.T) {
	c := New(Options{Entries: 100})
	const s = int64(time.Second)
	c.Put(key("a"), 3, false, Denial{Remaining: 2, RetryAfter: 10 * time.Second, ResetAfter: 30 * time.Second}, 100*s)
	c.Put(key("w"), 3, true, Denial{RetryAfter: 10 * time.Second}, 100*s)
	if d, ok := c.Get(key("a"), 3, 104*s); !ok || d.Remaining != 2 || d.RetryAfter != 6*time.Second || d.ResetAfter != 26*time.Second {
		t.Errorf("Get cost 3 at +4s = %+v, %v; want remaining 2, retry 6s, reset 26s", d, ok)
	}
	if _, ok := c.Get(key("a"), 2, 104*s); ok {
		t.Error("a cheaper request was answered from the cache")
	}
	if _, ok := c.Get(key("w"), 1, 104*s); !ok {
		t.Error("anyCost: a cheaper request was not answered from the cache")
	}
	if _, ok := c.Get(Key{"a", lim, ratelimit.FixedWindow}, 3, 104*s); ok {
		t.Error("another algorithm's denial was answered")
	}
	if _, ok := c.Get(key("a"), 3, 110*s); ok {
		t.Error("answered at its RetryAfter")
	}
	c.Put(key("z"), 1, false, Denial{}, 100*s)
	st := c.Stats()
	if st.Hits != 2 || st.Misses != 3 || st.Lookups != 5 || st.Expired != 1 || st.Entries != 1 || st.Bytes != uint64(1+EntryOverhead) {
		t.Errorf("stats %+v", st)
	}
	if New(Options{}) != nil {
		t.Error("a cache without a bound")
	}
}

// TestForget: Forget drops one limit's denial, ForgetKey every denial of
// the key.
func TestForget(t *testing.T) {
	c := New(Options{Bytes: 1 << 20})
	d := Denial{RetryAfter: time.Minute}
	other := Key{"a", lim, ratelimit.SlidingWindowLog}
	for _, k := range []Key{key("a"), other, key("b")} {
		c.Put(k, 1, false, d, 0)
	}
	c.Forget(key("a"))
	if _, ok := c.Get(key("a"), 1, 1); ok {
		t.Error("Forget kept the denial")
	}
	if _, ok := c.Get(other, 1, 1); !ok {
		t.Error("Forget dropped another limit's denial")
	}
	c.ForgetKey("a")
	if _, ok := c.Get(other, 1, 1); ok {
		t.Error("ForgetKey kept a denial of the key")
	}
	if st := c.Stats(); st.Entries != 1 || st.Bytes != uint64(1+EntryOverhead) {
		t.Errorf("after forgetting a: %+v, want b alone", st)
	}
}

// TestBounds floods caches bounded by bytes and by entries with distinct
// keys: neither holds more than its bound, and what did not fit is counted
// as evicted.
func TestBounds(t *testing.T) {
	for _, o := range []Options{{Bytes: 64 << 10}, {Entries: 256}} {
		c := New(o)
		const n = 4000
		for i := range n {
			c.Put(key(fmt.Sprintf("user-%06d", i)), 1, false, Denial{RetryAfter: time.Hour}, int64(i))
		}
		st := c.Stats()
		if (o.Bytes > 0 && st.Bytes > uint64(o.Bytes)) || (o.Entries > 0 && st.Entries > uint64(o.Entries)) ||
			st.Entries == 0 || st.Entries+st.Evictions != n {
			t.Errorf("%+v after %d keys: %+v", o, n, st)
		}
	}
	c := New(Options{Bytes: 16 * (EntryOverhead + 10)})
	c.Put(key(string(make([]byte, 100))), 1, false, Denial{RetryAfter: time.Hour}, 0)
	if st := c.Stats(); st.Entries != 0 {
		t.Errorf("an entry larger than a shard's share was cached: %+v", st)
	}
}

// TestExpiredFirst: a full shard drops expired entries before live ones.
func TestExpiredFirst(t *testing.T) {
	c := New(Options{Entries: 16}) // one per shard
	k := key("live")
	c.Put(k, 1, false, Denial{RetryAfter: time.Second}, 0)
	// Another key of the same shard, after the first expired.
	for i := 0; ; i++ {
		o := key(fmt.Sprint(i))
		if c.shard(o.Key) != c.shard(k.Key) {
			continue
		}
		c.Put(o, 1, false, Denial{RetryAfter: time.Second}, int64(2*time.Second))
		break
	}
	if st := c.Stats(); st.Expired != 1 || st.Evictions != 0 || st.Entries != 1 {
		t.Errorf("%+v; want the expired entry dropped, nothing evicted", st)
	}
}

// BenchmarkGet is the cost of a lookup that finds a denial, from many
// goroutines.
func BenchmarkGet(b *testing.B) {
	c := New(Options{Entries: 1 << 16})
	keys := make([]Key, 1024)
	for i := range keys {
		keys[i] = key(fmt.Sprint("k", i))
		c.Put(keys[i], 1, false, Denial{RetryAfter: time.Hour}, 0)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := c.Get(keys[i%len(keys)], 1, 1); !ok {
				b.Fatal("miss")
			}
			i++
		}
	})
}
