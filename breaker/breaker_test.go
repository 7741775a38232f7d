package breaker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/backoff"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestBreaker(t *testing.T) {
	t.Parallel()
	var changes []string
	b := New(Options{
		Threshold: 3,
		Backoff:   backoff.Exponential{Base: time.Second, Max: time.Minute}, // 2 s, 4 s, 8 s…
		OnStateChange: func(from, to State, now time.Time) {
			changes = append(changes, fmt.Sprintf("%v %v->%v", now.Sub(t0), from, to))
		},
	})
	allow := func(d time.Duration, wantProbe bool, wantErr bool) bool {
		t.Helper()
		probe, err := b.Allow(at(d))
		if probe != wantProbe || (err != nil) != wantErr {
			t.Fatalf("Allow(t0+%v) = %v, %v, want probe %v, error %v", d, probe, err, wantProbe, wantErr)
		}
		if err != nil && !errors.Is(err, ErrOpen) {
			t.Fatalf("Allow(t0+%v) error %v is not ErrOpen", d, err)
		}
		return probe
	}
	// Two failures and a success: still closed.
	b.Record(at(0), false, Failure, 0)
	b.Record(at(0), false, Failure, 0)
	b.Record(at(0), false, Success, 0)
	b.Record(at(0), false, Ignore, 0)
	b.Record(at(0), false, Failure, 0)
	b.Record(at(0), false, Failure, 0)
	allow(0, false, false)
	// The third failure in a row opens it, for max(Retry-After 5 s, backoff 2 s).
	b.Record(at(time.Second), false, Failure, 5*time.Second)
	if _, err := b.Allow(at(2 * time.Second)); err == nil || err.(*OpenError).Wait != 4*time.Second {
		t.Fatalf("Allow while open = %v, want open for another 4s", err)
	}
	if got := b.State(at(5 * time.Second)); got != Open {
		t.Errorf("State = %v, want open", got)
	}
	// Late results of calls made before it opened change nothing.
	b.Record(at(3*time.Second), false, Success, 0)
	allow(5*time.Second, false, true)
	// At 6 s it half-opens: one probe, the rest fail fast.
	if got := b.State(at(6 * time.Second)); got != HalfOpen {
		t.Errorf("State = %v, want half-open", got)
	}
	allow(6*time.Second, true, false)
	allow(6*time.Second, false, true)
	// The probe fails: open again, for the second backoff (4 s).
	b.Record(at(7*time.Second), true, Failure, 0)
	allow(10*time.Second, false, true)
	allow(11*time.Second, true, false)
	// A probe that never ran frees the slot.
	b.Record(at(11*time.Second), true, Ignore, 0)
	allow(11*time.Second, true, false)
	// The probe succeeds: closed, and the backoff starts over.
	b.Record(at(12*time.Second), true, Success, 0)
	allow(12*time.Second, false, false)
	want := "[1s closed->open 6s open->half-open 7s half-open->open 11s open->half-open 12s half-open->closed]"
	if got := fmt.Sprint(changes); got != want {
		t.Errorf("transitions = %s, want %s", got, want)
	}
}

func TestBreakerDefaults(t *testing.T) {
	t.Parallel()
	b := New(Options{})
	for range 4 {
		b.Record(t0, false, Failure, 0)
	}
	if b.State(t0) != Closed {
		t.Fatalf("opened before 5 failures")
	}
	b.Record(t0, false, Failure, 0)
	_, err := b.Allow(t0)
	var oe *OpenError
	if !errors.As(err, &oe) || oe.Wait < 500*time.Millisecond || oe.Wait > time.Second {
		t.Fatalf("Allow after 5 failures = %v, want open for 0.5–1 s", err)
	}
}

func BenchmarkAllowRecord(b *testing.B) {
	b.ReportAllocs()
	br := New(Options{})
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			probe, err := br.Allow(t0)
			if err == nil {
				br.Record(t0, probe, Success, 0)
			}
		}
	})
}
