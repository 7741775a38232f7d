package redistest_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestStandaloneKillRestart(t *testing.T) {
	s := redistest.Start(t)
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Do("GET", "k"); err != nil || got != "v" {
		t.Fatalf("GET k = %v, %v; want v", got, err)
	}
	pid := s.Pid()
	if pid <= 0 {
		t.Fatalf("Pid = %d while running", pid)
	}
	s.Kill()
	if s.Running() {
		t.Fatal("Running after Kill")
	}
	if p := s.Pid(); p != 0 {
		t.Fatalf("Pid after Kill = %d; want 0", p)
	}
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING answered after Kill")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if p := s.Pid(); p <= 0 || p == pid {
		t.Fatalf("Pid after Restart = %d (was %d); want a new process", p, pid)
	}
	if got, err := s.Do("GET", "k"); err != nil || got != nil {
		t.Fatalf("GET k after restart = %v, %v; want nil (persistence is off)", got, err)
	}
}

func TestShared(t *testing.T) {
	a, b := redistest.Shared(t), redistest.Shared(t)
	if a != b {
		t.Fatalf("Shared returned %v then %v; want the same server", a.Addr, b.Addr)
	}
	if p, q := redistest.Prefix(t), redistest.Prefix(t); p == q {
		t.Fatalf("Prefix returned %q twice", p)
	}
	if _, err := a.Do("NOSUCHCOMMAND"); err == nil {
		t.Fatal("unknown command: got no error")
	}
}

func TestCluster(t *testing.T) {
	c := redistest.SharedCluster(t)
	if len(c.Nodes) != 3 {
		t.Fatalf("got %d nodes, want 3", len(c.Nodes))
	}
	// Keys with different hash tags land on different nodes; each node
	// refuses keys it does not own with MOVED.
	seen := map[string]bool{}
	for _, k := range []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}", "{g}"} {
		n, err := c.NodeFor(k)
		if err != nil {
			t.Fatal(err)
		}
		seen[n.Addr] = true
		if _, err := n.Do("SET", k, "1"); err != nil {
			t.Fatalf("SET %s on its owner %s: %v", k, n.Addr, err)
		}
		for _, other := range c.Nodes {
			if other == n {
				continue
			}
			if _, err := other.Do("SET", k, "1"); err == nil {
				t.Fatalf("SET %s on %s (not its owner): got no error", k, other.Addr)
			}
		}
	}
	if len(seen) < 2 {
		t.Fatalf("7 hash tags all on %v; want them spread", seen)
	}
}

// TestValkey: StartValkey runs valkey-server, not redis-server, and it
// survives a kill and restart as a redis-server does.
func TestValkey(t *testing.T) {
	s := redistest.StartValkey(t)
	info, err := s.Do("INFO", "server")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := info.(string); !strings.Contains(v, "valkey_version:") {
		t.Fatalf("INFO server names no valkey_version:\n%.300s", v)
	}
	s.Kill()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after restart = %v, %v", got, err)
	}
}

// TestSmallCluster: clusters of one and two masters, which redis-cli
// --cluster create refuses, come up with every slot assigned, and a key is
// served by its owner only.
func TestSmallCluster(t *testing.T) {
	for _, masters := range []int{1, 2} {
		c := redistest.StartCluster(t, masters)
		if len(c.Nodes) != masters {
			t.Fatalf("got %d nodes, want %d", len(c.Nodes), masters)
		}
		owners := map[string]bool{}
		for _, k := range []string{"{a}", "{b}", "{c}", "{d}", "{e}", "{f}", "{g}"} {
			n, err := c.NodeFor(k)
			if err != nil {
				t.Fatal(err)
			}
			owners[n.Addr] = true
			if _, err := n.Do("SET", k, "1"); err != nil {
				t.Fatalf("%d masters: SET %s on its owner %s: %v", masters, k, n.Addr, err)
			}
			for _, other := range c.Nodes {
				if _, err := other.Do("SET", k, "1"); other != n && err == nil {
					t.Fatalf("%d masters: SET %s on %s (not its owner): got no error", masters, k, other.Addr)
				}
			}
		}
		if len(owners) != masters {
			t.Fatalf("%d masters: 7 hash tags served by %v", masters, owners)
		}
	}
}
