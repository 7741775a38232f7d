package runner

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStorePassword(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("p@ss:w/rd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	two := filepath.Join(dir, "two")
	os.WriteFile(two, []byte("a\nb\n"), 0o600)
	for _, tc := range []struct {
		p            StorePassword
		store, want  string
		wantErr      string
		wantPassword string
	}{
		{StorePassword{}, "redis://r:6379", "redis://r:6379", "", ""},
		{StorePassword{password: "s3cret"}, "redis://r:6379/0", "redis://:s3cret@r:6379/0", "", "s3cret"},
		{StorePassword{file: file}, "rediss://app@r:6380", "", "", "p@ss:w/rd"},
		{StorePassword{password: "x y"}, "redis-cluster://a:1,b:2", "", "", "x y"},
		{StorePassword{password: "pw"}, "unix:///run/redis.sock", "unix://:pw@/run/redis.sock", "", "pw"},
		{StorePassword{password: "pw"}, "memory", "", "needs a Redis --store URL", ""},
		{StorePassword{password: "pw"}, "redis://:old@r:1", "", "has a password already", ""},
		{StorePassword{password: "pw", file: file}, "redis://r:1", "", "give one", ""},
		{StorePassword{file: filepath.Join(dir, "none")}, "redis://r:1", "", "--store-password-file", ""},
		{StorePassword{file: two}, "redis://r:1", "", "want one non-empty line", ""},
	} {
		got, err := tc.p.Apply(tc.store)
		if tc.wantErr != "" {
			if err == nil || !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v.Apply(%q) = %q, %v; want a usage error with %q", tc.p, tc.store, got, err, tc.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "pw") && tc.p.password == "pw" || strings.Contains(err.Error(), "old")) {
				t.Errorf("the error shows a password: %v", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v.Apply(%q): %v", tc.p, tc.store, err)
			continue
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("%+v.Apply(%q) = %q, want %q", tc.p, tc.store, got, tc.want)
		}
		if tc.wantPassword != "" {
			// The password reaches the URL as rueidis will read it.
			u, err := url.Parse(strings.Replace(got, "redis-cluster://", "redis://", 1))
			if err != nil {
				t.Errorf("%q: %v", got, err)
				continue
			}
			if pw, _ := u.User.Password(); pw != tc.wantPassword {
				t.Errorf("%q carries password %q, want %q", got, pw, tc.wantPassword)
			}
		}
	}
}

// FuzzStorePassword: any password given apart reaches the URL intact.
func FuzzStorePassword(f *testing.F) {
	f.Add("s3cret", "redis://r:6379/0")
	f.Add("p@ss:w/rd?#%", "rediss://user@r:6380")
	f.Add("", "unix:///run/r.sock")
	f.Fuzz(func(t *testing.T, pw, store string) {
		if pw == "" || !strings.HasPrefix(store, "redis://") {
			return
		}
		got, err := (&StorePassword{password: pw}).Apply(store)
		if err != nil {
			return
		}
		u, err := url.Parse(got)
		if err != nil {
			return // a store URL that was bad before the password
		}
		if _, perr := url.Parse(store); perr == nil {
			if p, _ := u.User.Password(); p != pw {
				t.Errorf("apply(%q) with %q = %q: password %q", store, pw, got, p)
			}
		}
	})
}
