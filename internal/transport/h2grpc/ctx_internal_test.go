package h2grpc

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func TestCallCtxCancel(t *testing.T) {
	var x callCtx
	if _, ok := x.Deadline(); ok {
		t.Fatal("a deadline without a timeout")
	}
	done := x.Done()
	if closed(done) || x.Err() != nil {
		t.Fatal("done before cancel")
	}
	x.cancel(context.Canceled)
	x.cancel(context.DeadlineExceeded) // the first reason stays
	if !closed(done) || !closed(x.Done()) || x.Err() != context.Canceled {
		t.Fatalf("after cancel: closed %v, err %v", closed(done), x.Err())
	}

	// Canceled before anyone asked for Done.
	var y callCtx
	y.cancel(context.Canceled)
	if !closed(y.Done()) || y.Err() != context.Canceled {
		t.Fatal("Done after cancel is not closed")
	}
}

func TestCallCtxTimeout(t *testing.T) {
	var x callCtx
	x.setTimeout(10 * time.Millisecond)
	if d, ok := x.Deadline(); !ok || time.Until(d) > 10*time.Millisecond {
		t.Fatalf("deadline %v %v", d, ok)
	}
	select {
	case <-x.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the deadline did not cancel")
	}
	if x.Err() != context.DeadlineExceeded {
		t.Fatalf("err %v", x.Err())
	}

	// Canceled first: the timer is stopped and the reason stays.
	var y callCtx
	y.setTimeout(time.Millisecond)
	y.cancel(context.Canceled)
	time.Sleep(5 * time.Millisecond)
	if y.Err() != context.Canceled {
		t.Fatalf("err %v", y.Err())
	}
}

func TestCallCtxAfterFunc(t *testing.T) {
	var x callCtx
	ran := make(chan int, 3)
	stop1 := x.AfterFunc(func() { ran <- 1 })
	x.AfterFunc(func() { ran <- 2 })
	if !stop1() || stop1() {
		t.Fatal("stop: want true, then false")
	}
	x.cancel(context.Canceled)
	if got := <-ran; got != 2 {
		t.Fatalf("ran %d", got)
	}
	stop3 := x.AfterFunc(func() { ran <- 3 }) // after the end: runs at once
	if got := <-ran; got != 3 {
		t.Fatalf("ran %d", got)
	}
	if stop3() {
		t.Fatal("stop after running reported true")
	}
	select {
	case got := <-ran:
		t.Fatalf("a stopped func ran: %d", got)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestCallCtxDerived: contexts derived from a call's end with it, through
// AfterFunc rather than a goroutine each.
func TestCallCtxDerived(t *testing.T) {
	var x callCtx
	before := runtime.NumGoroutine()
	var kids []context.Context
	for range 100 {
		k, cancel := context.WithTimeout(&x, time.Hour)
		defer cancel()
		kids = append(kids, k)
	}
	if n := runtime.NumGoroutine() - before; n > 10 {
		t.Errorf("%d goroutines for 100 derived contexts", n)
	}
	x.cancel(context.Canceled)
	for i, k := range kids {
		select {
		case <-k.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("derived context %d not canceled", i)
		}
		if !errors.Is(k.Err(), context.Canceled) {
			t.Fatalf("derived context %d: %v", i, k.Err())
		}
	}
	stopped := make(chan bool, 1)
	context.AfterFunc(&x, func() { stopped <- true })
	<-stopped
}
