package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/internal/server/eventlog"
)

// capture is a slog.Handler keeping the records it handles.
type capture struct {
	mu   sync.Mutex
	recs []record
}

// record is one log line: its message and attributes, values formatted.
type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
	keys  []string
	count int64
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *capture) WithGroup(string) slog.Handler            { return c }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		switch a.Key {
		case "keys":
			rec.keys = a.Value.Any().([]string)
		case "count":
			rec.count = a.Value.Int64()
		}
		return true
	})
	c.mu.Lock()
	c.recs = append(c.recs, rec)
	c.mu.Unlock()
	return nil
}

// take returns the records handled since the last take.
func (c *capture) take() []record {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.recs
	c.recs = nil
	return r
}

func (r record) String() string {
	return fmt.Sprintf("%s %q %v", r.level, r.msg, r.attrs)
}

func newLog(opts eventlog.Options) (*eventlog.Log, *capture) {
	c := &capture{}
	return eventlog.New(slog.New(c), opts), c
}

// TestOutage: the first failure at once, then one line per interval, then
// after a quiet interval the next failure at once again.
func TestOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newLog(eventlog.Options{})
		defer l.Close()
		e1, e2 := errors.New("e1"), errors.New("e2")

		l.Report(eventlog.StoreError, "api", "k0", e1)
		got := c.take()
		if len(got) != 1 {
			t.Fatalf("after the first event: %v, want 1 line", got)
		}
		if r := got[0]; r.level != slog.LevelError || r.msg != "store failed" || r.attrs["kind"] != "store_error" ||
			r.attrs["rule"] != "api" || r.count != 1 || r.attrs["error"] != "e1" || r.attrs["first"] != "true" ||
			fmt.Sprint(r.keys) != "[k0]" {
			t.Errorf("first line: %v", r)
		}

		for i := range 20000 {
			err := e1
			if i == 19999 {
				err = e2
			}
			l.Report(eventlog.StoreError, "api", fmt.Sprint("k", i%5), err)
		}
		if got := c.take(); len(got) != 0 {
			t.Fatalf("within the interval: %v, want nothing", got)
		}
		time.Sleep(eventlog.DefaultInterval)
		synctest.Wait()
		got = c.take()
		if len(got) != 1 {
			t.Fatalf("after the interval: %v, want 1 line", got)
		}
		if r := got[0]; r.count != 20000 || r.attrs["error"] != "e2" || r.attrs["interval"] != "10s" ||
			fmt.Sprint(r.keys) != "[k0 k1 k2]" || r.attrs["first"] != "" {
			t.Errorf("summary: %v, want count 20000, keys [k0 k1 k2], error e2", r)
		}

		// A quiet interval: nothing to say, and the pair is forgotten.
		time.Sleep(eventlog.DefaultInterval)
		synctest.Wait()
		if got := c.take(); len(got) != 0 {
			t.Fatalf("after a quiet interval: %v, want nothing", got)
		}
		l.Report(eventlog.StoreError, "api", "k9", e1)
		if got := c.take(); len(got) != 1 || got[0].attrs["first"] != "true" {
			t.Fatalf("after a quiet interval, an event: %v, want a first line", got)
		}
	})
}

// TestLinesPerInterval: a steady flood on several pairs gives one line per
// pair per interval.
func TestLinesPerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newLog(eventlog.Options{Interval: time.Second})
		defer l.Close()
		pairs := []struct {
			kind eventlog.Kind
			rule string
		}{{eventlog.StoreError, "a"}, {eventlog.StoreError, "b"}, {eventlog.Denied, "a"}, {eventlog.ShadowDenied, "a"}}
		for range 5 {
			for range 1000 {
				for _, p := range pairs {
					l.Report(p.kind, p.rule, "k", nil)
				}
			}
			time.Sleep(time.Second)
			synctest.Wait()
		}
		got := c.take()
		// 4 first lines, then 4 summaries in each of 5 intervals.
		if len(got) != 4+4*5 {
			t.Errorf("%d lines, want %d: %v", len(got), 4+4*5, got)
		}
		for i, r := range got[4:] {
			want := int64(1000)
			if i < 4 {
				want = 999 // the first event had its own line
			}
			if r.count != want || r.attrs["first"] != "" {
				t.Errorf("summary %d: %v, want count %d", i, r, want)
			}
		}
		if got[4].msg != "store failed" || got[6].msg != "over limit in shadow mode" || got[7].msg != "over limit" {
			t.Errorf("summaries are not in the order of kinds, then rules: %v", got[4:8])
		}
	})
}

func TestSummaryOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newLog(eventlog.Options{SummaryOnly: true})
		l.Report(eventlog.Denied, "login", "ip", nil)
		l.Report(eventlog.Denied, "login", "ip", nil)
		if got := c.take(); len(got) != 0 {
			t.Errorf("before the interval: %v, want nothing", got)
		}
		time.Sleep(eventlog.DefaultInterval)
		synctest.Wait()
		got := c.take()
		if len(got) != 1 || got[0].count != 2 || fmt.Sprint(got[0].keys) != "[ip]" || got[0].level != slog.LevelInfo {
			t.Errorf("after the interval: %v, want one line, count 2", got)
		}
		l.Close()
	})
}

// TestMaxRules: past MaxRules pairs, events are counted in one overflow
// line per kind; a pair forgotten frees its place.
func TestMaxRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newLog(eventlog.Options{MaxRules: 2})
		defer l.Close()
		for i := range 10 {
			l.Report(eventlog.Denied, fmt.Sprint("r", i), "k", nil)
			l.Report(eventlog.StoreError, fmt.Sprint("r", i), "k", nil)
		}
		if got := c.take(); len(got) != 2 {
			t.Errorf("first lines: %v, want 2", got)
		}
		time.Sleep(eventlog.DefaultInterval)
		synctest.Wait()
		got := c.take()
		want := map[string]int64{"store_error": 9, "denied": 9}
		if len(got) != 2 {
			t.Fatalf("summaries: %v, want 2 overflow lines", got)
		}
		for _, r := range got {
			if r.attrs["overflow"] != "true" || r.count != want[r.attrs["kind"]] || r.attrs["rule"] != "" {
				t.Errorf("%v: want overflow=true count=%d", r, want[r.attrs["kind"]])
			}
		}
		time.Sleep(eventlog.DefaultInterval) // a quiet interval: r0's pairs are forgotten
		synctest.Wait()
		l.Report(eventlog.Denied, "r5", "k", nil)
		l.Report(eventlog.Denied, "r6", "k", nil)
		l.Report(eventlog.Denied, "r7", "k", nil)
		if got := c.take(); len(got) != 2 || got[0].attrs["rule"] != "r5" || got[1].attrs["rule"] != "r6" {
			t.Errorf("after the old pairs are forgotten: %v, want first lines of r5 and r6", got)
		}
	})
}

// TestBoundedStrings: long rule names and keys are cut at a UTF-8
// boundary and marked (Cut); keys are distinct; Samples bounds them.
func TestBoundedStrings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newLog(eventlog.Options{Samples: 2})
		defer l.Close()
		long := strings.Repeat("é", eventlog.MaxKeyLen) // cut in the middle of a rune
		l.Report(eventlog.Denied, long, long, nil)
		l.Report(eventlog.Denied, long+"x", long+"y", nil) // the same pair, the same key once cut
		l.Report(eventlog.Denied, long, "b", nil)
		l.Report(eventlog.Denied, long, "c", nil)
		l.Report(eventlog.Denied, long, "b", nil)
		time.Sleep(eventlog.DefaultInterval)
		synctest.Wait()
		got := c.take()
		if len(got) != 2 {
			t.Fatalf("%v, want 2 lines", got)
		}
		cut := long[:eventlog.MaxKeyLen] + eventlog.CutMarker
		r := got[1]
		if r.attrs["rule"] != cut || r.count != 4 || fmt.Sprint(r.keys) != fmt.Sprint([]string{cut, "b"}) {
			t.Errorf("summary: rule %d bytes, count %d, keys %q; want rule %d bytes (with the marker), count 4, keys [cut b]",
				len(r.attrs["rule"]), r.count, r.keys, len(cut))
		}
		if !utf8.ValidString(r.attrs["rule"]) {
			t.Errorf("rule %q is not UTF-8", r.attrs["rule"])
		}
	})
}

func TestNoSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newLog(eventlog.Options{Samples: -1})
		l.Report(eventlog.Denied, "r", "secret", nil)
		l.Report(eventlog.Denied, "r", "secret", nil)
		l.Close()
		for _, r := range c.take() {
			if _, ok := r.attrs["keys"]; ok {
				t.Errorf("%v names keys with Samples < 0", r)
			}
		}
	})
}

// TestEveryEventOnce reports from many goroutines while flushes run often
// (with the real clock), and checks that the lines count every event once:
// none lost when a pair is forgotten and recreated, none counted twice.
func TestEveryEventOnce(t *testing.T) {
	t.Parallel()
	l, c := newLog(eventlog.Options{Interval: time.Millisecond, MaxRules: 5})
	const workers, reports = 8, 20000
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range reports {
				rule := fmt.Sprint("r", (i/100+w)%7) // more rules than MaxRules, coming and going
				l.Report(eventlog.Kind(i%3), rule, "k", nil)
				if i%1000 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	l.Close()
	var total int64
	for _, r := range c.take() {
		total += r.count
	}
	if total != workers*reports {
		t.Errorf("lines count %d events, want %d", total, workers*reports)
	}
}

func TestCloseFlushesAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newLog(eventlog.Options{})
		l.Report(eventlog.Denied, "r", "k", nil)
		l.Report(eventlog.Denied, "r", "k", nil)
		l.Report(eventlog.Denied, "r", "k", nil)
		c.take()
		l.Close()
		if got := c.take(); len(got) != 1 || got[0].count != 2 {
			t.Errorf("Close wrote %v, want the summary of 2 events", got)
		}
		l.Report(eventlog.Denied, "r", "k", nil)
		l.Report(eventlog.Denied, "new", "k", nil)
		l.Close()
		l.Flush()
		if got := c.take(); len(got) != 0 {
			t.Errorf("after Close: %v, want nothing", got)
		}
		// synctest.Test fails if the Log's goroutine is still running.
	})
}

// TestNoGoroutineLeak checks with the real runtime that Close ends the
// goroutine New starts.
func TestNoGoroutineLeak(t *testing.T) {
	for range 10 {
		l := eventlog.New(nil, eventlog.Options{})
		l.Report(eventlog.StoreError, "r", "k", errors.New("x"))
		l.Close()
	}
	buf := make([]byte, 1<<20)
	for i := 0; ; i++ {
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "eventlog.(*Log).run") {
			break
		}
		if i == 1000 {
			t.Fatalf("a Log's goroutine survives Close:\n%s", stacks)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestUnknownKind(t *testing.T) {
	l, c := newLog(eventlog.Options{})
	l.Report(eventlog.Kind(200), "r", "k", nil)
	l.Close()
	if got := c.take(); len(got) != 0 {
		t.Errorf("an unknown kind logged %v", got)
	}
	if got := eventlog.Kind(200).String(); got != "unknown" {
		t.Errorf("Kind(200) = %q, want unknown", got)
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int // bytes kept before the marker; -1: unchanged
	}{
		{"", -1},
		{strings.Repeat("a", eventlog.MaxKeyLen), -1},
		{strings.Repeat("a", eventlog.MaxKeyLen+1), eventlog.MaxKeyLen},
		{strings.Repeat("a", 32<<10), eventlog.MaxKeyLen},
		{"a" + strings.Repeat("é", eventlog.MaxKeyLen), eventlog.MaxKeyLen - 1},
	} {
		got := eventlog.Cut(tc.in)
		if tc.want < 0 {
			if got != tc.in {
				t.Errorf("Cut(%d bytes) = %d bytes, want it unchanged", len(tc.in), len(got))
			}
			continue
		}
		if got != tc.in[:tc.want]+eventlog.CutMarker || !utf8.ValidString(got) {
			t.Errorf("Cut(%d bytes) = %d bytes %q, want %d bytes and the marker", len(tc.in), len(got), got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { eventlog.Cut("/api/v1/items") }); n != 0 {
		t.Errorf("Cut of a short value: %v allocations, want 0", n)
	}
}

// TestErrorsAreCut: an error's text in a line is at most MaxErrLen bytes
// and the marker.
func TestErrorsAreCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newLog(eventlog.Options{})
		defer l.Close()
		l.Report(eventlog.UpstreamError, "upstream", "/", errors.New(strings.Repeat("x", 64<<10)))
		got := c.take()
		if len(got) != 1 || got[0].attrs["error"] != strings.Repeat("x", eventlog.MaxErrLen)+eventlog.CutMarker {
			t.Fatalf("%d lines, error %d bytes; want 1 line, error %d bytes and the marker", len(got), len(got[0].attrs["error"]), eventlog.MaxErrLen)
		}
	})
}

// TestErrorLog: each line of an http.Server's error log is a ServerError
// event of its listener, a flood of them one line and a summary.
func TestErrorLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newLog(eventlog.Options{})
		defer l.Close()
		el := l.ErrorLog("listen")
		for i := range 1000 {
			el.Printf("http: TLS handshake error from 10.0.0.%d:5000: EOF", i%200)
		}
		time.Sleep(eventlog.DefaultInterval)
		synctest.Wait()
		got := c.take()
		if len(got) != 2 {
			t.Fatalf("%v, want 2 lines (the first, a summary)", got)
		}
		if r := got[1]; r.msg != "server error" || r.attrs["kind"] != "server_error" || r.attrs["rule"] != "listen" || r.count != 999 ||
			r.attrs["error"] != "http: TLS handshake error from 10.0.0.199:5000: EOF" || len(r.keys) != 0 {
			t.Errorf("summary: %v", r)
		}
	})
}
