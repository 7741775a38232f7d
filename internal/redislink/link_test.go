package redislink

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var errBoom = errors.New("boom")

// TestBreakerOpensAtThreshold: the breaker opens at the threshold of
// consecutive failures, a success in between starts the count again, and
// Health and OnHealth follow.
func TestBreakerOpensAtThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reported []bool
		l := New(Options{Threshold: 3, OnHealth: func(h Health) { reported = append(reported, h.Connected) }})
		n := l.Whole()
		n.Fail(errBoom, false)
		n.Fail(errBoom, false)
		n.OK()
		n.Fail(errBoom, false)
		n.Fail(errBoom, false)
		if n.Open() || !l.Health().Connected {
			t.Fatalf("open after 2 consecutive failures: %v", l.Health())
		}
		n.Fail(errBoom, true) // a probe does not count
		if n.Open() {
			t.Fatal("a failed probe counted towards the threshold")
		}
		n.Fail(errBoom, false)
		h := l.Health()
		if !n.Open() || h.Connected || h.NodesDown != 1 || h.Failures != 6 || !errors.Is(h.LastError, errBoom) {
			t.Fatalf("after the third consecutive failure: open %v, %+v", n.Open(), h)
		}
		if _, err := n.Allow(); !errors.Is(err, ErrDown) || !strings.Contains(err.Error(), "breaker open after 3 consecutive failures") {
			t.Fatalf("Allow right after opening: %v", err)
		}
		select {
		case <-l.Wake():
		default:
			t.Fatal("the prober was not woken")
		}
		n.OK()
		if h := l.Health(); !h.Connected || h.Reconnects != 1 {
			t.Fatalf("after a success: %+v", h)
		}
		if len(reported) != 2 || reported[0] || !reported[1] {
			t.Fatalf("OnHealth reported %v, want [false true]", reported)
		}
	})
}

// TestTrialOnePerInterval: while the breaker is open, one caller per
// Trial gets through, the others get the error at once; a trial's
// success closes it.
func TestTrialOnePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Threshold: 1, Trial: 100 * time.Millisecond})
		n := l.Whole()
		n.Fail(errBoom, false)
		trials := 0
		// 1000 callers over 1 s, one each millisecond: 10 trial intervals.
		for range 1000 {
			trial, err := n.Allow()
			switch {
			case trial && err == nil:
				trials++
				n.Fail(errBoom, false) // Redis still away
			case trial || err == nil:
				t.Fatalf("Allow = %v, %v", trial, err)
			}
			time.Sleep(time.Millisecond)
		}
		if trials != 9 && trials != 10 {
			t.Fatalf("%d trials in 1 s at one per 100 ms", trials)
		}
		time.Sleep(100 * time.Millisecond)
		if trial, err := n.Allow(); !trial || err != nil {
			t.Fatalf("after the interval: %v, %v; want a trial", trial, err)
		}
		n.OK()
		if trial, err := n.Allow(); trial || err != nil || n.Open() {
			t.Fatalf("after the trial's success: %v, %v, open %v; want closed", trial, err, n.Open())
		}
	})
}

// TestTrialsOff: with Trial negative, only OK (the prober's) closes the
// breaker.
func TestTrialsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Threshold: 1, Trial: -1})
		n := l.Whole()
		n.Fail(errBoom, false)
		time.Sleep(time.Hour)
		if trial, err := n.Allow(); trial || err == nil {
			t.Fatalf("Allow with trials off: %v, %v", trial, err)
		}
	})
}

// TestNodesApart: on a slot map, a node's breaker covers its slots only;
// a map without a node forgets its breaker (a failover), and the link is
// connected again.
func TestNodesApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Threshold: 1})
		m := &Slots{}
		for i := range m.Of {
			m.Of[i] = uint16(1 + i%3)
		}
		l.SetSlots(m, []string{"a:1", "b:1", "c:1"})
		i, a := l.For(0)
		_, b := l.For(1)
		if i != 1 || a == b || a == l.Whole() || l.Known("a:1") != a || l.Known("x:1") != nil {
			t.Fatalf("For(0) = %d, %p; For(1) = %p; Whole %p", i, a, b, l.Whole())
		}
		a.Fail(errBoom, false)
		if !a.Open() || b.Open() || l.Whole().Open() {
			t.Fatal("one node's failure opened another's breaker")
		}
		if h := l.Health(); h.Connected || h.NodesDown != 1 || h.Nodes != 3 || !strings.Contains(h.String(), "1 of 3 nodes down") {
			t.Fatalf("one node down: %+v (%v)", h, h)
		}
		// The map read again keeps b's breaker; a failover moved a's slots to d.
		b.Fail(errBoom, false)
		m2 := &Slots{Of: m.Of}
		l.SetSlots(m2, []string{"d:1", "b:1", "c:1"})
		_, b2 := l.For(1)
		_, d := l.For(0)
		if b2 != b || !b2.Open() || d == a || d.Open() {
			t.Fatal("SetSlots did not keep b's breaker, or gave d a's")
		}
		if h := l.Health(); h.NodesDown != 1 {
			t.Fatalf("a forgotten: %+v, want only b down", h)
		}
		a.Fail(errBoom, false) // a late failure of the forgotten node
		b.OK()
		if h := l.Health(); !h.Connected || h.NodesDown != 0 {
			t.Fatalf("after b's success: %+v", h)
		}
	})
}

// TestStartDown: a store that never connected is down from the start,
// without an OnHealth call, and the prober is woken.
func TestStartDown(t *testing.T) {
	called := false
	l := New(Options{OnHealth: func(Health) { called = true }, Unavailable: errBoom})
	l.Whole().StartDown(errors.New("refused"))
	if l.Health().Connected || called {
		t.Fatalf("health %v, OnHealth called %v", l.Health(), called)
	}
	if err := l.Whole().Err(); !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "not connected") {
		t.Fatalf("Err = %v", err)
	}
	select {
	case <-l.Wake():
	default:
		t.Fatal("the prober was not woken")
	}
}

func TestBackoff(t *testing.T) {
	l := New(Options{Cooldown: time.Second, MaxCooldown: 5 * time.Second})
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		if d := l.Backoff(n); d < want || d > want+want/4 {
			t.Errorf("Backoff(%d) = %v, want %v plus up to a quarter", n, d, want)
		}
	}
}

// BenchmarkAllowClosed is the cost every call pays while Redis answers.
func BenchmarkAllowClosed(b *testing.B) {
	n := New(Options{}).Whole()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := n.Allow(); err != nil {
				b.Fatal(err)
			}
			n.OK()
		}
	})
}

// TestSlotTag checks that every slot has a tag of at most 4 characters,
// without braces, that Redis Cluster hashes to it.
func TestSlotTag(t *testing.T) {
	for s := range uint16(16384) {
		tag := SlotTag(s)
		if tag == "" || len(tag) > 4 || strings.ContainsAny(tag, "{}") {
			t.Fatalf("slot %d: tag %q", s, tag)
		}
		if got := Slot("x{" + tag + "}y"); got != s {
			t.Fatalf("slot %d: tag %q hashes to %d", s, tag, got)
		}
	}
}
