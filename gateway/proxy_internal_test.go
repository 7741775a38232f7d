package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/identity"
)

// contains must agree with the allocating spelling, cgiName, for every
// name: a header it missed would reach the upstream under a spelling the
// gateway meant to strip.
func TestHeaderSetContains(t *testing.T) {
	t.Parallel()
	s := newHeaderSet("X-User", "x_tier", "Authorization", strings.Repeat("A", 70), "X-Ünï")
	for name, want := range map[string]bool{
		"X-User": true, "x-user": true, "X_USER": true, "x_User": true,
		"X-Tier": true, "AUTHORIZATION": true, "Authorization_": false,
		"X-Users": false, "": false, "X-Use": false,
		strings.Repeat("a", 70): true, strings.Repeat("a", 69): false,
		"x-ÜNÏ": true, "x_üNï": true, "X-Uni": false,
	} {
		if got := s.contains(name); got != want {
			t.Errorf("contains(%q) = %v, want %v", name, got, want)
		}
		if got := s[cgiName(name)]; got != want {
			t.Errorf("s[cgiName(%q)] = %v, want %v (the test's table is wrong)", name, got, want)
		}
	}
}

func FuzzHeaderSetContains(f *testing.F) {
	for _, s := range []string{"X-User", "x_user", "X-Ünï", strings.Repeat("z", 65), "a\x80b", "K"} {
		f.Add("X-User", s)
	}
	f.Fuzz(func(t *testing.T, member, name string) {
		s := newHeaderSet(member)
		if got, want := s.contains(name), s[cgiName(name)]; got != want {
			t.Fatalf("set {%q}: contains(%q) = %v, cgiName says %v", member, name, got, want)
		}
	})
}

// The identity travels in the request's context past any context a
// later layer puts around it.
func TestIdentityContext(t *testing.T) {
	t.Parallel()
	type otherKey struct{}
	base := context.WithValue(context.Background(), otherKey{}, "v")
	ctx := withIdentity(base, identity.Identity{User: "alice", Authenticated: true})
	id, ok := identityFrom(ctx)
	if !ok || id.User != "alice" {
		t.Fatalf("identityFrom = %+v, %v", id, ok)
	}
	if ctx.Value(otherKey{}) != "v" {
		t.Error("the parent's values are lost")
	}
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	if id, ok := identityFrom(inner); !ok || id.User != "alice" {
		t.Errorf("under a cancel context: identityFrom = %+v, %v", id, ok)
	}
	if _, ok := identityFrom(base); ok {
		t.Error("an identity where none was set")
	}
	// Cancelling the parent still reaches a child of the identity
	// context (context finds the parent's cancelCtx through Value).
	parent, stop := context.WithCancel(context.Background())
	child, cancel2 := context.WithCancel(withIdentity(parent, identity.Identity{}))
	defer cancel2()
	stop()
	<-child.Done()
}

// forward sets each identity header to its own one-value slice: an
// append to one does not change another.
func TestForwardIdentityHeaders(t *testing.T) {
	t.Parallel()
	ih := newIdentityHeaders(IdentityConfig{ForwardUserHeader: "X-Sluice-User", ForwardTierHeader: "X-Sluice-Tier", ForwardKindHeader: "X-Sluice-Kind"})
	in, _ := http.NewRequest("GET", "http://gw/x", nil)
	in = in.WithContext(withIdentity(in.Context(), identity.Identity{User: "alice", Tier: "gold", Authenticated: true, Method: "api_key"}))
	out := in.Clone(in.Context())
	out.Header.Set("x_sluice_user", "forged")
	pr := &httputil.ProxyRequest{In: in, Out: out}
	pr.SetURL(&url.URL{Scheme: "http", Host: "up"})
	ih.forward(pr)
	h := out.Header
	if len(h["X_sluice_user"]) != 0 {
		t.Errorf("the client's spelling of the user header survived: %q", h)
	}
	h.Add("X-Sluice-User", "extra")
	for k, want := range map[string][]string{"X-Sluice-User": {"alice", "extra"}, "X-Sluice-Tier": {"gold"}, "X-Sluice-Kind": {"api_key"}} {
		if got := h[k]; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
}

func TestConnList(t *testing.T) {
	t.Parallel()
	var l connList
	cs := make([]*limitedConn, 4)
	for i := range cs {
		cs[i] = &limitedConn{}
		l.pushBack(cs[i])
	}
	order := func() []int {
		var out []int
		for c := l.head; c != nil; c = c.next {
			for i := range cs {
				if cs[i] == c {
					out = append(out, i)
				}
			}
		}
		var back []int
		for c := l.tail; c != nil; c = c.prev {
			for i := range cs {
				if cs[i] == c {
					back = append([]int{i}, back...)
				}
			}
		}
		if fmt.Sprint(back) != fmt.Sprint(out) {
			t.Fatalf("forward walk %v, backward walk %v", out, back)
		}
		return out
	}
	if got := order(); len(got) != 4 || got[0] != 0 || got[3] != 3 {
		t.Fatalf("after pushes: %v", got)
	}
	l.remove(cs[0]) // head
	l.remove(cs[2]) // middle
	l.remove(cs[2]) // not listed: nothing
	l.remove(cs[3]) // tail
	if got := order(); len(got) != 1 || got[0] != 1 || l.head != cs[1] || l.tail != cs[1] {
		t.Fatalf("after removes: %v", got)
	}
	l.pushBack(cs[3])
	l.pushBack(cs[0])
	if got := order(); len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 0 {
		t.Fatalf("after re-pushes: %v", got)
	}
	l.remove(cs[1])
	l.remove(cs[3])
	l.remove(cs[0])
	if l.head != nil || l.tail != nil {
		t.Fatal("the list is not empty")
	}
}

func TestProxyBuffers(t *testing.T) {
	var p proxyBuffers
	b := p.Get()
	if len(b) != proxyBufferSize {
		t.Fatalf("len %d", len(b))
	}
	p.Put(b[:10]) // a shorter slice of a pooled buffer goes back whole
	p.Put(make([]byte, 100))
	if b := p.Get(); len(b) != proxyBufferSize {
		t.Fatalf("len %d after Put of a foreign slice", len(b))
	}
	// Putting a []byte in a sync.Pool would allocate on every Put; an
	// array pointer does not. (The race detector makes the pool drop
	// some Puts at random, so a Get may allocate a new buffer now and
	// then: the bound is below one per call, not zero.)
	if n := testing.AllocsPerRun(100, func() { p.Put(p.Get()) }); n >= 1 {
		t.Errorf("Get+Put allocated %v times per call", n)
	}
}
