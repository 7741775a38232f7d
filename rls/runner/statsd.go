package runner

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicehq/sluice/rls"
)

// rlsStatsFlags are sluice rls's flags for envoyproxy/ratelimit's statsd
// output and local over-limit cache.
type rlsStatsFlags struct {
	localCacheSize int
	statsd, prefix string
	flush          time.Duration
	tagList        string
	tags           map[string]string
}

func (f *rlsStatsFlags) add(fs *flag.FlagSet) {
	fs.IntVar(&f.localCacheSize, "local-cache-size-bytes", 0, "`BYTES` of the local over-limit cache, on any store (envoyproxy/ratelimit's LOCAL_CACHE_SIZE_IN_BYTES): a key found over its limit is answered from memory until its window ends; 0 disables it")
	fs.StringVar(&f.statsd, "statsd", "", "send envoyproxy/ratelimit's stats, with its names, to a statsd server at `ADDR`: host:port over UDP, or tcp://host:port as upstream's sink (its USE_STATSD, STATSD_HOST, STATSD_PORT); empty disables it")
	fs.DurationVar(&f.flush, "statsd-flush-interval", rls.DefaultStatsdFlushInterval, "how often stats are sent to --statsd (STATS_FLUSH_INTERVAL)")
	fs.StringVar(&f.tagList, "statsd-tags", "", "`NAME:VALUE,…` tags on every --statsd stat (EXTRA_TAGS)")
	fs.StringVar(&f.prefix, "statsd-prefix", "", "a `PREFIX` before every --statsd stat name (upstream has none)")
}

// check validates the flags after parsing.
func (f *rlsStatsFlags) check() error {
	if f.localCacheSize < 0 {
		return fmt.Errorf("%w: --local-cache-size-bytes %d is negative", ErrUsage, f.localCacheSize)
	}
	if f.flush <= 0 {
		return fmt.Errorf("%w: --statsd-flush-interval %v: want more than 0", ErrUsage, f.flush)
	}
	if f.tagList != "" {
		f.tags = map[string]string{}
		for _, kv := range strings.Split(f.tagList, ",") {
			k, v, ok := strings.Cut(kv, ":")
			if !ok || k == "" {
				return fmt.Errorf("%w: --statsd-tags %q: want NAME:VALUE,…", ErrUsage, f.tagList)
			}
			f.tags[k] = v
		}
	}
	if f.statsd != "" {
		// Refuse a bad address or tag now, as a usage error; the socket is
		// opened by dial.
		sd, err := f.dial(nil)
		if err != nil {
			return err
		}
		sd.Close()
	}
	return nil
}

// dial returns the --statsd sink, nil without one.
func (f *rlsStatsFlags) dial(log *slog.Logger) (*rls.Statsd, error) {
	if f.statsd == "" {
		return nil, nil
	}
	addr, network := f.statsd, "udp"
	if rest, ok := strings.CutPrefix(addr, "tcp://"); ok {
		addr, network = rest, "tcp"
	} else if rest, ok := strings.CutPrefix(addr, "udp://"); ok {
		addr = rest
	}
	sd, err := rls.DialStatsd(addr, rls.StatsdOptions{Network: network, Prefix: f.prefix, Tags: f.tags,
		FlushInterval: f.flush, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%w: --statsd: %v", ErrUsage, err)
	}
	return sd, nil
}
