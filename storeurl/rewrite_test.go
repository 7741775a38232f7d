package storeurl

import (
	"net/url"
	"strings"
	"testing"
)

func TestRewriteSentinel(t *testing.T) {
	for in, want := range map[string]string{
		"redis-sentinel://10.0.0.1:26379/mymaster":                      "redis://10.0.0.1:26379?master_set=mymaster",
		"redis-sentinel://:pw@10.0.0.1:26379,10.0.0.2:26379/mymaster/2": "redis://:pw@10.0.0.1:26379/2?addr=10.0.0.2%3A26379&master_set=mymaster",
		"redis-sentinel://a:1,b:2,c:3?master_set=m&dial_timeout=2s":     "redis://a:1?addr=b%3A2&addr=c%3A3&dial_timeout=2s&master_set=m",
		"sentinel://u:p@s1:26379/m":                                     "redis://u:p@s1:26379?master_set=m",
		"redis://127.0.0.1:6379/0":                                      "redis://127.0.0.1:6379/0",
		"rediss://h:6380/1?dial_timeout=1s":                             "rediss://h:6380/1?dial_timeout=1s",
		"redis-cluster://a:1,b:2":                                       "redis-cluster://a:1,b:2",
		"memory":                                                        "memory",
	} {
		got, tc, err := rewrite(in)
		if err != nil || got != want || tc != nil {
			t.Errorf("rewrite(%q) = %q, %v, %v; want %q", in, got, tc, err, want)
		}
	}
	for _, in := range []string{
		"redis-sentinel://10.0.0.1:26379",         // no master
		"redis-sentinel:///m",                     // no sentinel
		"redis://h:1?tls_ca=/x",                   // TLS files without TLS
		"redis-sentinel://h:1/m?tls_ca=/x",        // nor with Sentinel
		"rediss://h:1?tls_cert=/x",                // a certificate without its key
		"rediss://h:1?tls_ca=/does/not/exist.pem", // unreadable
		"rediss://h:1?%zz",                        // bad query
		"redis-sentinel://0#0/m",                  // a fragment in a host
		"redis-sentinel://h:1/m/#",                // a database that is not a number
		"redis-sentinel://#@0/0",                  // a fragment in the user info
	} {
		if got, _, err := rewrite(in); err == nil {
			t.Errorf("rewrite(%q) = %q, no error", in, got)
		}
	}
}

func FuzzRewrite(f *testing.F) {
	for _, s := range []string{"redis-sentinel://:pw@a:1,b:2/m/3?x=1", "rediss://h:1?tls_ca=", "sentinel://@/", "redis://h?%", "redis-sentinel://a,,b/m?master_set=n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, _, err := rewrite(s)
		if err != nil {
			return
		}
		if strings.HasPrefix(s, "redis-sentinel://") {
			u, perr := url.Parse(out)
			if perr == nil && u.Query().Get("master_set") == "" {
				t.Fatalf("rewrite(%q) = %q: no master_set", s, out)
			}
		}
	})
}
