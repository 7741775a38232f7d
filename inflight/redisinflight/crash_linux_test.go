package redisinflight_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/inflight/redisinflight"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// TestCrashedHolder: a child process takes both slots of a key on a real
// redis-server, renewing one; the slot it does not renew comes back after
// the TTL while the renewed one stays held past it; after the child is
// killed with SIGKILL (no Release, no deferred call), the renewed slot
// comes back too, after its TTL. Every wait polls with a deadline far
// above the TTL, so a slow machine cannot fail it.
func TestCrashedHolder(t *testing.T) {
	srv := redistest.Shared(t)
	e := standalone(t)
	pfx := prefix()
	s := newStore(t, e, redisinflight.Options{Prefix: pfx})
	ctx := context.Background()
	req := inflight.Request{Key: holderKey, Cap: 2, TTL: holderTTL}

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+srv.Addr, holderPrefix+"="+pfx)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != holderReady {
		t.Fatalf("holder said %q, %v", line, err)
	}
	ready := time.Now()

	if n, err := s.Peek(ctx, holderKey); err != nil || n != 2 {
		t.Fatalf("Peek with the holder's two leases = %d, %v; want 2", n, err)
	}
	if _, d, err := s.Acquire(ctx, req); err != nil || d.Allowed {
		t.Fatalf("Acquire while the holder holds both slots = %+v, %v; want denied", d, err)
	}

	// Lease A is never renewed: its slot comes back after the TTL.
	waitFor(t, "lease A's slot to come back", func() bool {
		l, d, err := s.Acquire(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			s.Release(ctx, l)
		}
		return d.Allowed
	})
	if waited := time.Since(ready); waited < holderTTL-holderTTL/4 {
		t.Errorf("lease A came back %v after the holder took it, before its TTL %v", waited, holderTTL)
	}

	// Lease B is renewed every 200 ms: still held two TTLs after it was
	// taken.
	for time.Since(ready) < 2*holderTTL+holderTTL/2 {
		time.Sleep(100 * time.Millisecond)
	}
	if n, err := s.Peek(ctx, holderKey); err != nil || n != 1 {
		t.Fatalf("Peek %v after the holder took its leases = %d, %v; want 1 (lease B, renewed)", time.Since(ready), n, err)
	}

	// The holder dies: nothing releases B, and its slot comes back after
	// the TTL.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	waitFor(t, "lease B's slot to come back", func() bool {
		n, err := s.Peek(ctx, holderKey)
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	for i := range 2 {
		if _, d, err := s.Acquire(ctx, req); err != nil || !d.Allowed {
			t.Fatalf("Acquire %d after the holder died = %+v, %v; want allowed", i, d, err)
		}
	}
	// Both Redis keys expire with their leases: nothing stays behind.
	z, w := s.Keys(holderKey)
	for _, k := range []string{z, w} {
		pttl, err := e.client.Do(ctx, e.client.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil || pttl <= 0 || pttl > holderTTL.Milliseconds()+1 {
			t.Errorf("PTTL %s = %d, %v; want within (0, %d] ms", k, pttl, err, holderTTL.Milliseconds()+1)
		}
	}
}

// waitFor polls cond every 50 ms for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
