package scale

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"
)

// ServerVersion returns INFO server's redis_version and mem_allocator of
// the server at addr.
func ServerVersion(ctx context.Context, addr string) (string, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return "", err
	}
	defer c.Close()
	info, err := c.Do(ctx, c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return "", err
	}
	mem, err := c.Do(ctx, c.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		return "", err
	}
	return infoField(info, "redis_version") + " (" + infoField(mem, "mem_allocator") + ")", nil
}

// WriteMemoryTable prints Memory's results: bytes per key (used_memory's
// growth and MEMORY USAGE), the projection to the seed's 100M keys beside
// its 1.6 GB estimate, and the layout model's parts for string values.
func WriteMemoryTable(w io.Writer, rs []MemoryResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algorithm\treq/key\tkeys\tRedis keys/key\tused_memory Δ\tB/key\tMEMORY USAGE\t100M keys\t× seed's 1.6 GB\tmodel q8/q16\tkey names\tdictEntry\tvalues\texpires\tbuckets\twrite time\t")
	for _, r := range rs {
		proj := r.Projected(SeedKeys)
		model := "-"
		parts := []string{"-", "-", "-", "-", "-"}
		l8, ok8 := StringLayout(r.Example, r.Keys, r.DBKeys, 8)
		l16, _ := StringLayout(r.Example, r.Keys, r.DBKeys, 16)
		if ok8 {
			model = fmt.Sprintf("%.1f/%.1f", l8.Total(), l16.Total())
			l := l16
			if abs(l8.Total()-r.PerKey()) < abs(l16.Total()-r.PerKey()) {
				l = l8
			}
			parts = []string{fmt.Sprint(l.KeyName), fmt.Sprint(l.DictEntry), fmt.Sprint(l.Value), fmt.Sprint(l.ExpireItem), fmt.Sprintf("%.1f", l.Buckets)}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%d\t%.1f\t%.1f\t%.2f GB\t%.1f×\t%s\t%s\t%s\t%s\t%s\t%s\t%v\t\n",
			r.Algorithm, r.Hits, r.Keys, r.RedisKeysPerKey(), r.After-r.Before, r.PerKey(), r.UsageMean, proj/1e9, proj/SeedEstimate, model,
			parts[0], parts[1], parts[2], parts[3], parts[4], r.Elapsed.Round(time.Millisecond))
	}
	return tw.Flush()
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// Indent returns s with every line indented by prefix (for logs).
func Indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
