package abuse

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// journalConfig is a gateway on the memory store with a snapshot file in
// dir (taken once an hour: a crash finds only the journal since start)
// and a monthly quota of limit per X-Client, with extra snapshot settings.
func journalConfig(t *testing.T, dir string, limit int, snapshot string) string {
	return writeFile(t, dir, "gateway.yaml", fmt.Sprintf(`
upstream: builtin:echo
snapshot: {file: %s, interval: 1h%s}
routes:
  - path: /q
    rate_limits:
      - actions: [{request_headers: {header_name: X-Client, descriptor_key: client}}]
rules:
  domain: abuse
  descriptors:
    - key: client
      quota: {period: month, limit: %d}
`, filepath.Join(dir, "state.snap"), snapshot, limit))
}

// kill ends the gateway with SIGKILL (the OOM killer, a node lost): no
// shutdown, no last snapshot.
func (g *gatewayProc) kill(t *testing.T) {
	t.Helper()
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-g.exited
}

// startSpent starts a gateway on journalConfig (a quota of 20) in dir and
// spends n of alice's quota; it returns the gateway and its config file.
func startSpent(t *testing.T, dir, snapshot string, n int) (*gatewayProc, string) {
	t.Helper()
	cfg := journalConfig(t, dir, 20, snapshot)
	g := startServe(t, cfg)
	if got := admitted(t, g, "alice", n); got != n {
		t.Fatalf("%d of the first %d admitted, want %d", got, n, n)
	}
	return g, cfg
}

// admitted sends n requests of caller to /q and counts the 200s.
func admitted(t *testing.T, g *gatewayProc, caller string, n int) int {
	t.Helper()
	c := client(t)
	ok := 0
	for range n {
		if code, _, _ := do(t, c, "GET", g.url+"/q", "X-Client", caller); code == http.StatusOK {
			ok++
		}
	}
	return ok
}

// waitJournal waits, up to 10 s, until the journal holds at least bytes
// (its writes are what a crash keeps); it returns whether it did.
func waitJournal(file string, bytes int64) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(file); err == nil && fi.Size() >= bytes {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// A journal's layout, as memstore writes it: a 32-byte header, a 17-byte
// mark, and a 53-byte record per charge of a quota.
const (
	journalHead   = 32 + 17
	journalRecord = 53
)

// Attack (or accident): the process dies without a shutdown — SIGKILL,
// the OOM killer, a node lost — after a caller has used most of a monthly
// quota. Before the journal, everything since the last snapshot (one a
// minute by default) was forgotten, and the caller got the whole quota
// again: quotas are billing.
//
// Bound: with the defaults (journal on beside snapshot.file, written
// every second), 15 of 20 used, SIGKILL 1.5 s later (past the journal's
// interval): after the restart the caller gets exactly the 5 left.
func TestQuotaSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	month := time.Now().UTC().Month()
	g, cfg := startSpent(t, dir, "", 15)
	time.Sleep(1500 * time.Millisecond) // past the journal's interval (1 s)
	// On a loaded machine the journal's tick may come late: the bound is
	// about what was written, so wait for the write (bounded) too.
	waitJournal(filepath.Join(dir, "state.snap.journal"), journalHead+15*journalRecord)
	g.kill(t)

	r := startServe(t, cfg)
	n := admitted(t, r, "alice", 20)
	if time.Now().UTC().Month() != month {
		t.Skip("the month changed during the test: the quota was reset")
	}
	if n != 5 {
		t.Errorf("after SIGKILL and a restart the caller got %d more of its monthly 20, having used 15: want 5", n)
	}
}

// ratelimitRemaining reads r= of the RateLimit header.
var ratelimitRemaining = regexp.MustCompile(`;r=(\d+)`)

// Bound, under load: 8 callers spend one quota as fast as the gateway
// answers for about 3 s, with the journal written every 200 ms; SIGKILL
// at a random point of a request stream. After the restart the quota has
// lost at most what was admitted in the last second before the kill (five
// intervals: the last write, and its fsync, may lag on a loaded machine),
// and counts no more than was admitted plus the requests in flight or
// answered while the count stopped (two a caller: no charge counted
// twice).
func TestQuotaSIGKILLUnderLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const limit, workers = 1_000_000, 8
	cfg := journalConfig(t, dir, limit, ", journal_interval: 200ms")
	g := startServe(t, cfg)
	month := time.Now().UTC().Month()

	var (
		mu    sync.Mutex
		times []time.Time // when each admitted answer arrived
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	c := client(t)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200_000 && !stop.Load(); i++ {
				code, _, _, err := tryDo(c, "GET", g.url+"/q", "X-Client", "bulk")
				if err != nil {
					return // the kill
				}
				if code == http.StatusOK {
					mu.Lock()
					times = append(times, time.Now())
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(3 * time.Second)
	mu.Lock() // no answer counted from here on
	killed := time.Now()
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-g.exited
	before := len(times)
	mu.Unlock()
	stop.Store(true)
	wg.Wait()
	lastSecond := 0
	for _, at := range times[:before] {
		if at.After(killed.Add(-time.Second)) {
			lastSecond++
		}
	}

	r := startServe(t, cfg)
	_, hdr, _ := do(t, client(t), "GET", r.url+"/q", "X-Client", "bulk")
	m := ratelimitRemaining.FindStringSubmatch(hdr.Get("RateLimit"))
	if m == nil {
		t.Fatalf("no remaining in RateLimit: %q", hdr.Get("RateLimit"))
	}
	rem, _ := strconv.Atoi(m[1])
	kept := limit - rem - 1 // this request spent one
	if time.Now().UTC().Month() != month {
		t.Skip("the month changed during the test: the quota was reset")
	}
	lost := before - kept
	t.Logf("admitted before SIGKILL %d (%d in its last second), kept after the restart %d: lost %d", before, lastSecond, kept, lost)
	if before < 100 || lastSecond == before {
		t.Fatalf("only %d admitted (%d in the last second): the load did not run", before, lastSecond)
	}
	if lost > lastSecond {
		t.Errorf("SIGKILL lost %d charges, more than the %d admitted in the last second before it", lost, lastSecond)
	}
	if kept > before+2*workers {
		t.Errorf("the restart counts %d charges, more than the %d admitted and %d in flight: counted twice", kept, before, 2*workers)
	}
}

// Attack (or accident): the journal is damaged on disk (a bad block, a
// bit flipped, a torn write) or cut short by the crash itself.
//
// Bound: a last record cut short is the expected crash: the whole records
// before it are replayed, with a warning naming the file and offset. A
// damaged record with more after it is refused with an error naming the
// file and offset; the whole records before it are replayed (the last
// good state), the damaged file is kept aside byte for byte, and the
// gateway starts with a new journal.
func TestDamagedJournalRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(b []byte) []byte
		log    *regexp.Regexp
		left   int // of 20, after 10 used and the damage
	}{
		{"torn", func(b []byte) []byte { return b[:len(b)-20] },
			regexp.MustCompile(`level=WARN msg="gateway: journal's last record was cut short.*" file=\S+state\.snap\.journal offset=` + strconv.Itoa(journalHead+9*journalRecord) + ` bytes=33`), 11},
		{"damaged", func(b []byte) []byte { b[journalHead+3*journalRecord+20] ^= 1; return b },
			regexp.MustCompile(`level=ERROR msg="gateway: journal damaged.*" file=\S+state\.snap\.journal offset=` + strconv.Itoa(journalHead+3*journalRecord) + ` reason="record checksum mismatch.*kept=\S+state\.snap\.journal\.damaged-\d+ replayed=3`), 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			month := time.Now().UTC().Month()
			g, cfg := startSpent(t, dir, ", journal_interval: 100ms", 10)
			file := filepath.Join(dir, "state.snap.journal")
			if !waitJournal(file, journalHead+10*journalRecord) {
				t.Fatal("the journal did not hold 10 records within 10 s")
			}
			g.kill(t)
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			bad := tc.damage(b)
			if err := os.WriteFile(file, bad, 0o600); err != nil {
				t.Fatal(err)
			}

			start := time.Now()
			r := startServe(t, cfg)
			n := admitted(t, r, "alice", 20)
			if time.Now().UTC().Month() != month {
				t.Skip("the month changed during the test: the quota was reset")
			}
			if n != tc.left {
				t.Errorf("after the restart the caller got %d more of its monthly 20: want %d", n, tc.left)
			}
			found := false
			for _, l := range r.lines(start) {
				found = found || tc.log.MatchString(l)
			}
			if !found {
				t.Errorf("no log line matching %s", tc.log)
			}
			if tc.name == "damaged" {
				kept, _ := filepath.Glob(file + ".damaged-*")
				if len(kept) != 1 {
					t.Fatalf("damaged journals kept: %v, want one", kept)
				}
				if got, _ := os.ReadFile(kept[0]); !bytes.Equal(got, bad) {
					t.Error("the damaged journal kept aside is not the file as it was")
				}
			}
		})
	}
}
