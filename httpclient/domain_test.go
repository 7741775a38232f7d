package httpclient

import (
	"net/http"
	"testing"
)

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
