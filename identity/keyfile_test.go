package identity

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
)

func writePEM(t *testing.T, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadJWTKey(t *testing.T) {
	t.Parallel()
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey().PublicKey)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ecKey().PublicKey)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, append(append([]byte(nil), hsSecret...), '\n'), 0o600)
	short := filepath.Join(t.TempDir(), "short")
	os.WriteFile(short, []byte("tiny\n"), 0o600)
	privDER := x509.MarshalPKCS1PrivateKey(rsaKey())
	tests := []struct {
		name, alg, path string
		ok              bool
	}{
		{"RS256 PKIX", RS256, writePEM(t, "PUBLIC KEY", rsaDER), true},
		{"RS256 PKCS1", RS256, writePEM(t, "RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&rsaKey().PublicKey)), true},
		{"ES256", ES256, writePEM(t, "PUBLIC KEY", ecDER), true},
		{"HS256 secret", HS256, secret, true},
		{"HS256 short secret", HS256, short, false},
		{"ES256 given an RSA key", ES256, writePEM(t, "PUBLIC KEY", rsaDER), false},
		{"private key refused", RS256, writePEM(t, "RSA PRIVATE KEY", privDER), false},
		{"not PEM", RS256, secret, false},
		{"missing file", RS256, filepath.Join(t.TempDir(), "nope"), false},
		{"unknown alg", "HS512", secret, false},
	}
	for _, tt := range tests {
		k, err := LoadJWTKey(tt.alg, tt.path)
		if (err == nil) != tt.ok {
			t.Errorf("LoadJWTKey(%s) = %T, %v, want ok %v", tt.name, k, err, tt.ok)
			continue
		}
		if tt.ok {
			if _, err := NewResolver(Options{JWT: &JWTConfig{Algorithm: tt.alg, Key: k}}); err != nil {
				t.Errorf("NewResolver with %s key = %v", tt.name, err)
			}
		}
	}
}
