package httpclient

import (
	"context"
	"net/http"
	"testing"
)

func TestPerEgress(t *testing.T) {
	key := PerEgress(RegistrableDomain)
	req, _ := http.NewRequest(http.MethodGet, "https://www.example.com/", nil)
	if got := key(req); got != "example.com" {
		t.Errorf("no egress: %q", got)
	}
	req = req.WithContext(WithEgress(context.Background(), "10.0.0.7"))
	if got := key(req); got != "10.0.0.7 example.com" {
		t.Errorf("with egress: %q", got)
	}
	if got := PerEgress(nil)(req); got != "10.0.0.7 www.example.com" {
		t.Errorf("default host: %q", got)
	}
}

func TestRegistrableDomain(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"http://example.com/":          "example.com",
		"http://www.example.com:8080/": "example.com",
		"https://a.b.c.Example.COM/x":  "example.com",
		"https://www.example.co.uk/":   "example.co.uk",
		"https://img.example.com.au/":  "example.com.au",
		"https://example.co.uk/":       "example.co.uk",
		"https://shop.example.de/":     "example.de",
		"http://localhost:8080/":       "localhost",
		"http://127.0.0.1:8089/":       "127.0.0.1:8089",
		"http://[::1]:80/":             "[::1]:80",
		"http://www.example.com./":     "example.com",
		// Private suffixes of the Public Suffix List: each owner apart.
		"https://alice.github.io/":          "alice.github.io",
		"https://bob.github.io/x":           "bob.github.io",
		"https://bucket.s3.amazonaws.com/k": "bucket.s3.amazonaws.com",
		"https://x.blob.core.windows.net/":  "x.blob.core.windows.net",
		"https://a.nhs.uk/":                 "a.nhs.uk",
		"https://www.a.nhs.uk/":             "a.nhs.uk",
		"https://github.io/":                "github.io",
		"https://foo.bar.kawasaki.jp/":      "foo.bar.kawasaki.jp",
		"https://city.kawasaki.jp/":         "city.kawasaki.jp",
	} {
		req, err := http.NewRequest(http.MethodGet, in, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := RegistrableDomain(req); got != want {
			t.Errorf("RegistrableDomain(%s) = %q, want %q", in, got, want)
		}
	}
}
