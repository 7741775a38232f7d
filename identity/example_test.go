package identity_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"

	"github.com/sluicehq/sluice/identity"
)

func ExampleResolver_Resolve() {
	// A keys file line: the key's SHA-256, the user, the tier.
	keys, _ := identity.ParseKeyFile("keys.txt", []byte(identity.HashKey("sk_live_alice")+" alice pro\n"))
	r, _ := identity.NewResolver(identity.Options{APIKeys: keys})

	// The same key from a laptop and a phone: one identity.
	for _, remote := range []string{"192.0.2.10:5000", "198.51.100.20:6000"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = remote
		req.Header.Set("Authorization", "Bearer sk_live_alice")
		id, _ := r.Resolve(req)
		fmt.Println(remote, "→", id.Key(), id.Tier)
	}

	// No credential: anonymous, by IP.
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "203.0.113.5:7000"
	id, _ := r.Resolve(req)
	fmt.Println(id.Key())

	// A bad credential is an error, never anonymous.
	req.Header.Set("X-API-Key", "sk_guess")
	_, err := r.Resolve(req)
	fmt.Println(err)
	// Output:
	// 192.0.2.10:5000 → user:alice pro
	// 198.51.100.20:6000 → user:alice pro
	// ip:203.0.113.5
	// identity: unknown API key: identity: unauthorized
}

func ExampleClientIP() {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Forwarded-For", "6.6.6.6, 203.0.113.9, 10.0.0.7")

	req.RemoteAddr = "10.0.0.1:443" // our load balancer
	fmt.Println(identity.ClientIP(req.RemoteAddr, req.Header, trusted))

	req.RemoteAddr = "198.51.100.1:443" // anyone else: headers ignored
	fmt.Println(identity.ClientIP(req.RemoteAddr, req.Header, trusted))
	// Output:
	// 203.0.113.9
	// 198.51.100.1
}

func ExampleHashKey() {
	// The keys file stores this, never the key.
	fmt.Println(identity.HashKey("demo-key-123"))
	// Output:
	// a52782e3a2d4dd2f95f640b9abfb3b2a6b8e722c65f55be830f6e5f619f7f873
}
