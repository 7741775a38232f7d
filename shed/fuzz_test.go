package shed_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/shed"
)

// FuzzNewClasses: any list of names is an order or an ErrClasses, never a
// panic; an accepted order looks every name up at its own index.
func FuzzNewClasses(f *testing.F) {
	f.Add("test,get,post,critical")
	f.Add("a,a")
	f.Add(",x")
	f.Add("Critical")
	f.Add(strings.Repeat("c,", 20))
	f.Fuzz(func(t *testing.T, list string) {
		names := strings.Split(list, ",")
		cs, err := shed.NewClasses(names...)
		if err != nil {
			if !errors.Is(err, shed.ErrClasses) {
				t.Fatalf("NewClasses(%q) = %v, not an ErrClasses", names, err)
			}
			return
		}
		if cs.Len() != len(names) {
			t.Fatalf("NewClasses(%q): %d classes", names, cs.Len())
		}
		for i, n := range names {
			if c, ok := cs.Lookup(n); !ok || int(c) != i || cs.Name(c) != n {
				t.Fatalf("Lookup(%q) = %d %v, want %d", n, c, ok, i)
			}
		}
	})
}
