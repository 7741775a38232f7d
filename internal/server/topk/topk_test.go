package topk_test

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/server/topk"
)

// With no more distinct keys in a shard than it has counters, the counts
// are exact. The guarantee is per shard and the hash seed is random, so
// the keys are picked to fill every shard to exactly its counters: the
// edge of the guarantee, in every shard, whatever the seed.
func TestExactBelowCapacity(t *testing.T) {
	const capacity, shards = 64, 4
	tk := topk.New(topk.Options{Capacity: capacity, Shards: shards})
	keys := keysFillingShards(t, tk, shards)
	if len(keys) != capacity {
		t.Fatalf("got %d keys for %d counters", len(keys), capacity)
	}
	want := map[string]uint64{}
	for i, k := range keys {
		for range i + 1 {
			tk.Record(k)
			want[k]++
		}
	}
	got := tk.Top(0)
	if len(got) != capacity {
		t.Fatalf("got %d entries, want %d", len(got), capacity)
	}
	for i, e := range got {
		if e.Err != 0 || e.Count != want[e.Key] {
			t.Errorf("%s: got count %d err %d, want %d err 0", e.Key, e.Count, e.Err, want[e.Key])
		}
		if i > 0 && got[i-1].Count < e.Count {
			t.Errorf("not sorted at %d: %d before %d", i, got[i-1].Count, e.Count)
		}
	}
	if last := keys[len(keys)-1]; got[0].Key != last || got[0].Count != capacity {
		t.Errorf("got top %+v, want %s with %d", got[0], last, capacity)
	}
	if n := tk.Total(); n != capacity*(capacity+1)/2 {
		t.Errorf("got total %d, want %d", n, capacity*(capacity+1)/2)
	}
	if top := tk.Top(3); len(top) != 3 {
		t.Errorf("got Top(3) of %d, want 3", len(top))
	}
}

// keysFillingShards returns distinct keys "k0", "k1", ... chosen so that
// each of tk's shards gets exactly as many as it has counters.
func keysFillingShards(t *testing.T, tk *topk.TopK, shards int) []string {
	t.Helper()
	room := make([]int, shards)
	free := 0
	for i := range room {
		room[i] = tk.ShardCounters(i)
		free += room[i]
	}
	var keys []string
	// Each candidate lands in a shard with a chance of 1/shards: 1000
	// candidates per counter leave a shard unfilled with a chance far
	// below 2^-100.
	for i := 0; free > 0 && i < 1000*tk.Capacity(); i++ {
		k := "k" + strconv.Itoa(i)
		if s := tk.ShardOf(k); room[s] > 0 {
			room[s]--
			free--
			keys = append(keys, k)
		}
	}
	if free > 0 {
		t.Fatalf("shards left with room %v", room)
	}
	return keys
}

// Space-Saving's guarantees on a skewed random stream: every reported
// count bounds the true count within Err, and Err is at most
// N_shard/m_shard, which with one shard is N/m.
func TestErrorBound(t *testing.T) {
	const m, n = 50, 200_000
	tk := topk.New(topk.Options{Capacity: m, Shards: 1})
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(r, 1.2, 1, 100_000)
	truth := map[string]uint64{}
	for range n {
		k := strconv.FormatUint(zipf.Uint64(), 10)
		truth[k]++
		tk.Record(k)
	}
	for _, e := range tk.Top(0) {
		tr := truth[e.Key]
		if e.Count < tr || e.Count-e.Err > tr {
			t.Errorf("%s: got count %d err %d, true %d not in [count-err, count]", e.Key, e.Count, e.Err, tr)
		}
		if e.Err > n/m {
			t.Errorf("%s: got err %d, want at most N/m = %d", e.Key, e.Err, n/m)
		}
	}
	// Every key above N/m is tracked.
	tracked := map[string]bool{}
	for _, e := range tk.Top(0) {
		tracked[e.Key] = true
	}
	for k, c := range truth {
		if c > n/m && !tracked[k] {
			t.Errorf("key %s with %d > N/m = %d not tracked", k, c, n/m)
		}
	}
}

// A flood of 2M distinct keys: the memory held stays that of the
// counters, and a heavy hitter hidden in it is found first with its count
// bounded as promised.
func TestFixedMemoryUnderDistinctFlood(t *testing.T) {
	const distinct = 2_000_000
	const heavyEvery = 20 // the heavy hitter is 1 record in 20
	tk := topk.New(topk.Options{})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	var buf []byte
	feed := func(from, to int) (heavy uint64) {
		for i := from; i < to; i++ {
			buf = strconv.AppendInt(append(buf[:0], "ip:10."...), int64(i), 10)
			tk.Record(string(buf))
			if i%heavyEvery == 0 {
				tk.Record("ip:203.0.113.7")
				heavy++
			}
		}
		return heavy
	}
	heavy := feed(0, distinct/10)
	before := heap()
	heavy += feed(distinct/10, distinct)
	after := heap()
	runtime.KeepAlive(tk)
	// The counters are full after the first tenth: nine times more
	// distinct keys must not grow what the TopK holds. 1 MiB of slack
	// for the runtime's own noise; the counters with keys of this size
	// take about 50 KiB.
	if after > before+1<<20 {
		t.Errorf("heap grew from %d to %d bytes over %d more distinct keys", before, after, distinct*9/10)
	}
	top := tk.Top(1)
	if len(top) != 1 || top[0].Key != "ip:203.0.113.7" {
		t.Fatalf("got top %+v, want the heavy hitter ip:203.0.113.7", top)
	}
	e := top[0]
	if e.Count < heavy || e.Count-e.Err > heavy {
		t.Errorf("got count %d err %d, true count %d not in [count-err, count]", e.Count, e.Err, heavy)
	}
	// The bound holds per shard: err <= N_shard/m_shard of the shard that
	// counts the key.
	s := tk.ShardOf(e.Key)
	if bound := tk.ShardTotal(s) / uint64(tk.ShardCounters(s)); e.Err > bound {
		t.Errorf("got err %d, want at most N_shard/m_shard = %d", e.Err, bound)
	}
}

func TestLongKeysAreCut(t *testing.T) {
	tk := topk.New(topk.Options{MaxKeyLen: 8, Capacity: 4, Shards: 1})
	long := strings.Repeat("x", 1000)
	tk.Record(long)
	tk.Record(long + "y") // the same key once cut
	got := tk.Top(0)
	if len(got) != 1 || got[0].Key != "xxxxxxxx" || got[0].Count != 2 {
		t.Fatalf("got %+v, want one 8-byte key counted twice", got)
	}
}

func TestFirstLast(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tk := topk.New(topk.Options{Capacity: 2, Shards: 1})
	tk.RecordAt("a", t0)
	tk.RecordAt("a", t0.Add(time.Minute))
	tk.RecordAt("b", t0.Add(2*time.Minute))
	tk.RecordAt("c", t0.Add(3*time.Minute)) // takes b's counter: count 2, err 1
	got := tk.Top(0)
	if len(got) != 2 {
		t.Fatalf("got %+v", got)
	}
	for _, e := range got {
		switch e.Key {
		case "a":
			if !e.First.Equal(t0) || !e.Last.Equal(t0.Add(time.Minute)) || e.Count != 2 || e.Err != 0 {
				t.Errorf("got a %+v", e)
			}
		case "c":
			if !e.First.Equal(t0.Add(3*time.Minute)) || e.Count != 2 || e.Err != 1 {
				t.Errorf("got c %+v, want count 2 err 1 first at t0+3m", e)
			}
		default:
			t.Errorf("got unexpected %+v", e)
		}
	}
}

func TestConcurrent(t *testing.T) {
	tk := topk.New(topk.Options{Capacity: 32})
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 5000 {
				tk.Record("k" + strconv.Itoa((i*7+g)%100))
				if i%1000 == 0 {
					tk.Top(5)
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	if n := tk.Total(); n != 20000 {
		t.Errorf("got total %d, want 20000", n)
	}
}

func TestRecordKnownKeyDoesNotAllocate(t *testing.T) {
	tk := topk.New(topk.Options{})
	key := "sl:token_bucket:60000ms:sluice_remote_address_10.0.0.1_"
	tk.Record(key)
	if n := testing.AllocsPerRun(1000, func() { tk.Record(key) }); n != 0 {
		t.Errorf("got %v allocs per Record of a known key, want 0", n)
	}
}
