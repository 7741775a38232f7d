package identity

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestReasonOf: each refused credential says why, from the fixed set of
// Reasons, and its message holds no credential.
func TestReasonOf(t *testing.T) {
	t.Parallel()
	now := func() time.Time { return t0 }
	r, err := NewResolver(Options{APIKeys: testKeys(t),
		JWT: &JWTConfig{Algorithm: HS256, Key: hsSecret, Now: now, Issuer: "iss", Audience: "api"}})
	if err != nil {
		t.Fatal(err)
	}
	good := func(kv ...any) string {
		return sign(t, HS256, claims(append([]any{"iss", "iss", "aud", "api"}, kv...)...), hsSecret)
	}
	for _, c := range []struct {
		name   string
		header string // "Authorization: …" or "X-API-Key: …"
		want   Reason
	}{
		{"unknown key", "X-API-Key: sk_mallory", ReasonUnknownKey},
		{"unknown bearer key", "Authorization: Bearer sk_mallory", ReasonUnknownKey},
		{"basic", "Authorization: Basic c2stbWFsbG9yeQ==", ReasonMalformed},
		{"garbage jwt", "Authorization: Bearer a.b.c", ReasonMalformed},
		{"bad signature", "Authorization: Bearer " + sign(t, HS256, claims("iss", "iss", "aud", "api"), []byte("another-secret-another-secret-another")), ReasonBadSignature},
		{"alg none", "Authorization: Bearer " + sign(t, "none", claims(), nil), ReasonWrongAlgorithm},
		{"expired", "Authorization: Bearer " + good("exp", t0.Add(-time.Hour).Unix()), ReasonExpired},
		{"not yet valid", "Authorization: Bearer " + good("nbf", t0.Add(time.Hour).Unix()), ReasonNotYetValid},
		{"wrong issuer", "Authorization: Bearer " + good("iss", "evil"), ReasonWrongIssuer},
		{"wrong audience", "Authorization: Bearer " + good("aud", "web"), ReasonWrongAudience},
		{"no sub", "Authorization: Bearer " + good("sub", nil), ReasonMissingClaim},
	} {
		req := httptest.NewRequest("GET", "/", nil)
		k, v, _ := strings.Cut(c.header, ": ")
		req.Header.Set(k, v)
		_, err := r.Resolve(req)
		if got := ReasonOf(err); got != c.want || !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: got %v (reason %q), want reason %q", c.name, err, got, c.want)
		}
		if tok := strings.TrimPrefix(v, "Bearer "); err != nil && len(tok) > 8 && strings.Contains(err.Error(), tok) {
			t.Errorf("%s: the error %q holds the credential", c.name, err)
		}
	}
	if got := ReasonOf(errors.New("other")); got != "" {
		t.Errorf("ReasonOf(other) = %q, want \"\"", got)
	}
}
