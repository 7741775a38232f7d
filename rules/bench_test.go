package rules

import "testing"

func BenchmarkMatch(b *testing.B) {
	c := mustParse(b, "basic_config.yaml")
	w := mustParse(b, "wildcard.yaml")
	cases := []struct {
		name    string
		c       *Config
		entries []Entry
	}{
		{"key_only", c, e("key2", "something")},
		{"exact", c, e("key2", "value2")},
		{"nested", c, e("key1", "value1", "subkey1", "subvalue1")},
		{"wildcard", w, e("wild", "foo123")},
		{"mid_wildcard", w, e("midWild", "bar123b")},
		{"multi_wildcard", w, e("multiWild", "foo123bar456baz")},
		{"late_wildcard", w, e("under", "y")}, // tried after nine wildcards of other keys
		{"miss", c, e("nope", "x")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = tc.c.Match(tc.entries)
				}
			})
		})
	}
}

func BenchmarkAppendKey(b *testing.B) {
	c := mustParse(b, "basic_config.yaml")
	entries := e("key1", "value1", "subkey1", "subvalue1")
	r := c.Match(entries)
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendKey(buf[:0], entries)
	}
}

func TestMatchAllocs(t *testing.T) {
	c := mustParse(t, "wildcard.yaml")
	entries := e("wild", "foo123")
	if n := testing.AllocsPerRun(100, func() { c.Match(entries) }); n != 0 {
		t.Errorf("Match allocs = %v, want 0", n)
	}
}
