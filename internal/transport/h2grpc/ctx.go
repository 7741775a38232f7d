package h2grpc

import (
	"context"
	"sync"
	"time"
)

// callCtx is a call's context, part of its stream: canceled when the
// client resets the stream, the call's grpc-timeout passes, the call ends
// or its connection does. context.WithCancel of a connection-wide context
// did the same, at the price of registering every call in the parent's
// map of children and removing it again, 5% of sluice rls's CPU.
//
// Contexts derived from it do not need a goroutine each: it has the
// AfterFunc method the context package looks for.
type callCtx struct {
	mu       sync.Mutex
	done     chan struct{} // made by the first Done, or closedChan
	err      error
	deadline time.Time
	timer    *time.Timer
	funcs    []*afterFunc
}

type afterFunc struct{ f func() }

// closedChan is the Done channel of a context canceled before anyone
// asked for it.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// setTimeout arms the call's deadline, d from now.
func (x *callCtx) setTimeout(d time.Duration) {
	x.deadline = time.Now().Add(d)
	x.timer = time.AfterFunc(d, func() { x.cancel(context.DeadlineExceeded) })
}

func (x *callCtx) Deadline() (time.Time, bool) { return x.deadline, !x.deadline.IsZero() }

func (x *callCtx) Done() <-chan struct{} {
	x.mu.Lock()
	if x.done == nil {
		x.done = make(chan struct{})
	}
	d := x.done
	x.mu.Unlock()
	return d
}

func (x *callCtx) Err() error {
	x.mu.Lock()
	err := x.err
	x.mu.Unlock()
	return err
}

func (x *callCtx) Value(any) any { return nil }

// AfterFunc arranges for f to run in its own goroutine once x is done, as
// context.AfterFunc does; stop keeps it from running, and reports whether
// it did.
func (x *callCtx) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	x.funcs = append(x.funcs, a)
	x.mu.Unlock()
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		for i, g := range x.funcs {
			if g == a {
				x.funcs = append(x.funcs[:i], x.funcs[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel ends x with err, unless it has ended already.
func (x *callCtx) cancel(err error) {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	x.err = err
	if x.done == nil {
		x.done = closedChan
	} else {
		close(x.done)
	}
	funcs := x.funcs
	x.funcs = nil
	t := x.timer
	x.mu.Unlock()
	if t != nil {
		t.Stop()
	}
	for _, a := range funcs {
		go a.f()
	}
}

func (x *callCtx) String() string { return "h2grpc.callCtx" }
