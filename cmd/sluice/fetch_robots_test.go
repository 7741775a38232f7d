package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestFetchRobotsAsTheUser: robots.txt is asked with the user's headers
// (a credential, a virtual Host) of the host the requests go to, and its
// attempts and refusals are counted in the summary, apart from the URLs'.
// An API that refuses anonymous callers refuses an anonymous robots.txt.
func TestFetchRobotsAsTheUser(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var robotsKey, robotsHost []string
	anon := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			robotsKey = append(robotsKey, r.Header.Get("X-Api-Key"))
			robotsHost = append(robotsHost, r.Host)
		}
		if r.Header.Get("X-Api-Key") != "k1" {
			// The anonymous budget is spent.
			anon++
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	sum, stderr, err := fetchJSON(t, "-H", "X-API-Key: k1", "-H", "Host: api.example", srv.URL+"/a", srv.URL+"/b", srv.URL+"/private/c")
	if err == nil {
		t.Fatalf("want the disallowed URL to fail; summary %+v", sum)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(robotsKey) != 1 || robotsKey[0] != "k1" || robotsHost[0] != "api.example" {
		t.Errorf("robots.txt asked with X-API-Key %q and Host %q, want once with k1 and api.example", robotsKey, robotsHost)
	}
	if anon != 0 {
		t.Errorf("%d anonymous requests, want none", anon)
	}
	if sum.Succeeded != 2 || sum.Failed != 1 || sum.Attempts != 2 {
		t.Errorf("summary %+v, want 2 succeeded, 1 failed (disallowed), 2 attempts; stderr %s", sum, stderr)
	}
	if sum.Robots == nil || sum.Robots.Attempts != 1 || sum.Robots.Status["200"] != 1 {
		t.Errorf("robots summary %+v, want 1 attempt, status 200", sum.Robots)
	}
	if n := strings.Count(stderr, "disallowed by robots.txt"); n != 1 {
		t.Errorf("the Disallow said %d times, want once:\n%s", n, stderr)
	}
}

// TestFetchRobotsRefusalsCounted: robots.txt's own 429s and the waits they
// cost are in the summary.
func TestFetchRobotsRefusalsCounted(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	robots := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			robots++
			if robots == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	sum, stderr, err := fetchJSON(t, srv.URL+"/a")
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	r := sum.Robots
	if r == nil || r.Attempts != 2 || r.Retries != 1 || r.Status["429"] != 1 || r.Status["200"] != 1 || r.WaitMS < 1000 {
		t.Errorf("robots summary %+v, want 2 attempts, 1 retry, a 429 and a 200, at least the 1 s of Retry-After waited", r)
	}
	if sum.Attempts != 1 || sum.Status["429"] != 0 {
		t.Errorf("the URL's counts %+v: want 1 attempt and robots.txt's 429 not among them", sum)
	}
}

// TestFetchDownHost: a host that refuses connections is reported as
// unreachable, with the network error, not as disallowed by robots.txt.
func TestFetchDownHost(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	var stdout, stderr bytes.Buffer
	err = run(t.Context(), []string{"fetch", "http://" + addr + "/x"}, &stdout, &stderr)
	if err == nil {
		t.Fatal("want an error")
	}
	out := stderr.String() + stdout.String()
	if strings.Contains(out, "disallowed") || !strings.Contains(out, "unreachable") || !strings.Contains(out, "connection refused") {
		t.Errorf("output:\n%s\nwant unreachable with the network error, not disallowed", out)
	}
}
