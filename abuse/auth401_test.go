package abuse

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Attack: a flood of wrong credentials — unknown API keys, garbage
// bearer tokens, JWTs with a forged signature, expired, not yet valid,
// from the wrong issuer or for the wrong audience, each one fresh — and
// of wrong admin tokens, to go unnoticed (nothing counted) or to drown the
// log (a line per request) and to get the credentials written to it.
//
// Bound: every 401 is counted in sluice_gateway_unauthorized_total by its
// reason (a fixed label set), and logged through the event log: at most
// two lines per reason (the first, then one summary per interval; the
// process here stops within one), their counts summing to the refusals;
// no key or token text is in the log. Bad admin tokens are counted in
// sluice_admin_actions_total and logged the same bounded way.
func TestUnauthorizedFloodCountedAndBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := "abuse-test-hs256-secret-0123456789abcdef"
	writeFile(t, dir, "jwt.key", secret)
	writeFile(t, dir, "keys.txt", keyLine("key-alice", "alice", "pro"))
	writeFile(t, dir, "admin.token", "admin-token-0123456789abcdef")
	cfg := writeFile(t, dir, "gateway.yaml", `
upstream: builtin:echo
admin_token_file: admin.token
identity:
  api_keys_file: keys.txt
  jwt: {alg: HS256, key_file: jwt.key, issuer: sluice-test, audience: api}
routes:
  - path: /
`)
	g := startServe(t, cfg)
	c := client(t)
	now := time.Now()
	good := map[string]any{"sub": "alice", "iss": "sluice-test", "aud": "api", "exp": now.Add(time.Hour).Unix()}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		m[k] = v
		return m
	}
	const each = 40
	var sent []string // every credential, to look for in the log
	kinds := []struct {
		reason string
		header func(i int) (string, string)
	}{
		{"unknown_key", func(i int) (string, string) { return "X-API-Key", fmt.Sprintf("sk_flood_%06d", i) }},
		{"malformed", func(i int) (string, string) { return "Authorization", fmt.Sprintf("Bearer garbage%06d.x.y", i) }},
		{"bad_signature", func(i int) (string, string) {
			return "Authorization", "Bearer " + hs256(with("jti", strconv.Itoa(i)), "not-the-secret-not-the-secret-0123456789")
		}},
		{"expired", func(i int) (string, string) {
			return "Authorization", "Bearer " + hs256(with("exp", now.Add(-time.Duration(i+1)*time.Hour).Unix()), secret)
		}},
		{"not_yet_valid", func(i int) (string, string) {
			return "Authorization", "Bearer " + hs256(with("nbf", now.Add(time.Duration(i+1)*time.Hour).Unix()), secret)
		}},
		{"wrong_issuer", func(i int) (string, string) {
			return "Authorization", "Bearer " + hs256(with("iss", fmt.Sprint("evil", i)), secret)
		}},
		{"wrong_audience", func(i int) (string, string) {
			return "Authorization", "Bearer " + hs256(with("aud", fmt.Sprint("web", i)), secret)
		}},
	}
	for _, k := range kinds {
		for i := range each {
			h, v := k.header(i)
			sent = append(sent, strings.TrimPrefix(v, "Bearer "))
			if code, _, _ := do(t, c, "GET", g.url+"/", h, v); code != http.StatusUnauthorized {
				t.Fatalf("%s %d: got %d, want 401", k.reason, i, code)
			}
		}
	}
	if code, _, _ := do(t, c, "GET", g.url+"/", "X-API-Key", "key-alice"); code != http.StatusOK {
		t.Fatalf("a good key: got %d, want 200", code)
	}
	for i := range each {
		tok := fmt.Sprintf("wrong-admin-token-%06d", i)
		sent = append(sent, tok)
		if code, _, _ := do(t, c, "GET", g.admin+"/admin/state", "Authorization", "Bearer "+tok); code != http.StatusUnauthorized {
			t.Fatalf("admin token %d: got %d, want 401", i, code)
		}
	}
	m := scrape(t, g.admin)
	for _, k := range kinds {
		if got := m.value(t, "sluice_gateway_unauthorized_total", "reason", k.reason); got != each {
			t.Errorf("sluice_gateway_unauthorized_total{reason=%q} = %v, want %d", k.reason, got, each)
		}
	}
	if got := m.value(t, "sluice_admin_actions_total", "action", "list", "result", "unauthorized"); got != each {
		t.Errorf("admin unauthorized = %v, want %d", got, each)
	}
	g.stop() // the event log writes what it counted
	out := g.output()
	counts := map[string]int{}
	lines := map[string]int{}
	countRE := regexp.MustCompile(`rule=(\S+) count=(\d+)`)
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, `msg="credential refused"`) {
			if strings.Contains(line, "unauthorized") {
				t.Errorf("a 401 logged outside the event log: %s", line)
			}
			continue
		}
		mm := countRE.FindStringSubmatch(line)
		if mm == nil {
			t.Errorf("credential refused line without rule and count: %s", line)
			continue
		}
		n, _ := strconv.Atoi(mm[2])
		counts[mm[1]] += n
		lines[mm[1]]++
	}
	for _, reason := range append([]string{"admin_token"}, func() (r []string) {
		for _, k := range kinds {
			r = append(r, k.reason)
		}
		return r
	}()...) {
		if counts[reason] != each || lines[reason] > 2 {
			t.Errorf("reason %s: %d lines counting %d, want at most 2 lines counting %d", reason, lines[reason], counts[reason], each)
		}
	}
	for _, s := range sent {
		if strings.Contains(out, s) {
			t.Fatalf("the log holds a credential sent (%.20s…)", s)
		}
	}
}

// hs256 signs claims as a JWT with secret.
func hs256(claims map[string]any, secret string) string {
	enc := base64.RawURLEncoding
	hdr := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	pl, _ := json.Marshal(claims)
	signed := hdr + "." + enc.EncodeToString(pl)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(mac.Sum(nil))
}
