package rls_test

import (
	"testing"

	"github.com/sluicehq/sluice/bench/rls"
	"github.com/sluicehq/sluice/internal/testharness/redistest"
)

// TestRedisPID: the process id a redis-server reports is the one the
// harness started; an address with nothing listening is an error.
func TestRedisPID(t *testing.T) {
	r := redistest.Start(t)
	pid, err := rls.RedisPID(r.Addr)
	if err != nil || pid != r.Pid() {
		t.Fatalf("RedisPID(%s) = %d, %v; want %d", r.Addr, pid, err, r.Pid())
	}
	r.Close()
	if pid, err := rls.RedisPID(r.Addr); err == nil {
		t.Fatalf("RedisPID of a stopped server = %d, want an error", pid)
	}
}
