package testidp_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testharness/testidp"
)

func TestIdP(t *testing.T) {
	idp := testidp.New(t)
	k := idp.AddRSA(t, "k1")
	get := func() string {
		res, err := http.Get(idp.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	if body := get(); !strings.Contains(body, `"kid":"k1"`) || strings.Contains(body, `"d"`) {
		t.Errorf("set %s: want k1's public key only", body)
	}
	idp.Remove("k1")
	if body := get(); strings.Contains(body, "k1") {
		t.Errorf("after Remove: %s", body)
	}
	if tok := testidp.Sign(t, "RS256", "k1", k, `{"sub":"alice"}`); strings.Count(tok, ".") != 2 {
		t.Errorf("Sign = %q", tok)
	}
	if n := idp.Fetches(); n != 2 {
		t.Errorf("Fetches = %d, want 2", n)
	}
}
