package scale_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/bench/scale"
)

// What one token-bucket key of the seed's rule costs redis-server by the
// model, with a stock jemalloc (16-byte quantum), among a million keys.
func ExampleStringLayout() {
	ks := []scale.RedisKey{{Name: "sluice:t{sl:token_bucket:60000ms:api_user_632be598c0ebccc7_}", Encoding: "embstr", ValueBytes: 20}}
	l, _ := scale.StringLayout(ks, 1_000_000, 1_000_000, 16)
	fmt.Printf("key %d + dictEntry %d + value %d + expire %d + buckets %.1f = %.1f B\n",
		l.KeyName, l.DictEntry, l.Value, l.ExpireItem, l.Buckets, l.Total())
	// Output:
	// key 64 + dictEntry 32 + value 48 + expire 32 + buckets 16.8 = 192.8 B
}

func ExampleQuantile() {
	lags := []time.Duration{120 * time.Millisecond, 480 * time.Millisecond, 910 * time.Millisecond}
	fmt.Println(scale.Quantile(lags, 0.5), scale.Quantile(lags, 1))
	// Output: 480ms 910ms
}
