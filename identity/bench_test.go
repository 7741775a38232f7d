package identity

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func BenchmarkResolve(b *testing.B) {
	r, err := NewResolver(Options{
		TrustedProxies: prefixes("10.0.0.0/8"),
		APIKeys:        testKeys(b),
		JWT:            &JWTConfig{Algorithm: HS256, Key: hsSecret, Now: func() time.Time { return t0 }},
	})
	if err != nil {
		b.Fatal(err)
	}
	jwt := sign(b, HS256, claims(), hsSecret)
	cases := []struct {
		name    string
		remote  string
		headers map[string]string
	}{
		{"anonymous", "198.51.100.7:1", nil},
		{"trusted_proxy_xff", "10.0.0.1:1", map[string]string{"X-Forwarded-For": "203.0.113.9, 10.1.2.3"}},
		{"api_key", "198.51.100.7:1", map[string]string{"X-API-Key": "sk_alice"}},
		{"jwt_hs256", "198.51.100.7:1", map[string]string{"Authorization": "Bearer " + jwt}},
	}
	for _, tc := range cases {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = tc.remote
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id, err := r.Resolve(req)
					if err != nil {
						b.Fatal(err)
					}
					_ = id.Key()
				}
			})
		})
	}
}

func BenchmarkClientIP(b *testing.B) {
	h := http.Header{"X-Forwarded-For": {"6.6.6.6, 203.0.113.9, 10.1.2.3"}}
	trusted := prefixes("10.0.0.0/8")
	b.ReportAllocs()
	for b.Loop() {
		ClientIP("10.0.0.1:443", h, trusted)
	}
}
