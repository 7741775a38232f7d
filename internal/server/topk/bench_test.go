package topk_test

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/server/topk"
)

// The denial path of a flood: one known key, many goroutines.
func BenchmarkRecordKnown(b *testing.B) {
	tk := topk.New(topk.Options{})
	key := "sl:token_bucket:60000ms:sluice_remote_address_203.0.113.7_"
	tk.Record(key)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tk.Record(key)
		}
	})
}

// Many known keys spread over the shards.
func BenchmarkRecordKnownSpread(b *testing.B) {
	tk := topk.New(topk.Options{})
	keys := make([]string, 128)
	for i := range keys {
		keys[i] = "sl:token_bucket:60000ms:sluice_remote_address_10.0.0." + strconv.Itoa(i) + "_"
		tk.Record(keys[i])
	}
	var g atomic.Uint32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(g.Add(1)) * 17
		for pb.Next() {
			tk.Record(keys[i%len(keys)])
			i++
		}
	})
}

// A flood of fresh keys: every record takes a counter (one key copy).
func BenchmarkRecordDistinct(b *testing.B) {
	tk := topk.New(topk.Options{})
	keys := make([]string, 1<<16)
	for i := range keys {
		keys[i] = "ip:" + strconv.Itoa(i)
	}
	var g atomic.Uint32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(g.Add(1)) * 7919
		for pb.Next() {
			tk.Record(keys[i&(len(keys)-1)])
			i++
		}
	})
}
