package redisstore_test

import (
	"testing"

	"github.com/sluicehq/sluice/redisstore"
)

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:secret@h:6379/0":                "redis://u:xxxxx@h:6379/0",
		"redis://:secret@h:6379":                   "redis://:xxxxx@h:6379",
		"rediss://u:p%40ss@h?dial_timeout=1s":      "rediss://u:xxxxx@h?dial_timeout=1s",
		"redis-cluster://u:secret@h1:7000,h2:7001": "redis-cluster://u:xxxxx@h1:7000,h2:7001",
		"redis://h:6379/0":                         "redis://h:6379/0",
		"redis://user@h":                           "redis://user@h",
		"redis://h/0?x=a@b:c":                      "redis://h/0?x=a@b:c",
		"unix:///run/redis.sock":                   "unix:///run/redis.sock",
		"memory":                                   "memory",
		"redis://u:s@cret@h":                       "redis://u:xxxxx@h",
	} {
		if got := redisstore.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
