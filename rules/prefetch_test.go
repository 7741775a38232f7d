package rules_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rules"
)

// TestPrefetchEveryAlgorithm: the one rule of what may be prefetched
// (ratelimit.Algorithm.Prefetchable) is the rules engine's, for every
// algorithm and both spellings: Parse refuses prefetch: true at the field's
// file:line with Prefetchable's words when it says no, and otherwise
// accepts it and Set.Bind sends the rule to BindOptions.Prefetch; lease:
// true means the same and is a warning at its line, not an error.
func TestPrefetchEveryAlgorithm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, a := range ratelimit.Algorithms() {
		for _, field := range []string{"prefetch", "lease"} {
			yaml := fmt.Sprintf("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      algorithm: %v\n      window: 1s\n      requests_per_unit: 10\n      %s: true\n", a, field)
			cfg, err := rules.Parse("p.yaml", []byte(yaml))
			why := a.Prefetchable()
			if why != nil {
				want := "p.yaml:8: descriptors[0].rate_limit." + field + ": " + strings.TrimPrefix(why.Error(), "ratelimit: ")
				if err == nil || err.Error() != want {
					t.Errorf("%v, %s: true: Parse error %v, want %q", a, field, err, want)
				}
				continue
			}
			if err != nil {
				t.Errorf("%v, %s: true: Parse refused it: %v", a, field, err)
				continue
			}
			r := cfg.Rules()[0]
			if !r.Prefetch {
				t.Errorf("%v, %s: true: rule not prefetched", a, field)
			}
			w := cfg.Warnings()
			switch {
			case field == "prefetch" && len(w) != 0:
				t.Errorf("%v, prefetch: true: warnings %v, want none", a, w)
			case field == "lease" && (len(w) != 1 || w[0].Error() != "p.yaml:8: descriptors[0].rate_limit.lease: lease is deprecated (it now means the in-flight slot only): write prefetch: true, which means the same"):
				t.Errorf("%v, lease: true: warnings %v, want one at p.yaml:8", a, w)
			}
			set, err := rules.NewSet(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if sw := set.Warnings(); len(sw) != len(w) {
				t.Errorf("%v, %s: Set.Warnings %v, want the config's %v", a, field, sw, w)
			}
			store, pf := memstore.New(memstore.Options{}), memstore.New(memstore.Options{})
			bound, err := set.Bind(store, rules.BindOptions{Prefetch: pf})
			if err != nil {
				t.Fatalf("%v: Bind: %v", a, err)
			}
			cs, err := bound.Resolve(nil, rules.Input{Domain: "d", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "k", Value: "v"}}, Hits: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs[0].Decide(ctx, store, cs[0].Request); err != nil {
				t.Fatal(err)
			}
			if store.Len() != 0 || pf.Len() != 1 {
				t.Errorf("%v: store holds %d keys, the prefetch store %d; want 0 and 1", a, store.Len(), pf.Len())
			}
			store.Close()
			pf.Close()
		}
	}
}

// TestBindRefusesUnprefetchable: Set.Bind applies the same rule at every
// load: a prefetched rule whose algorithm is not Prefetchable (a rule
// changed after Parse) is refused at the rule's file:line, and no Set is
// returned.
func TestBindRefusesUnprefetchable(t *testing.T) {
	t.Parallel()
	set := bindSet(t, bindYAML)
	var leaky *rules.Rule
	for _, r := range set.Config("d").Rules() {
		if r.Key == "d.leaky" {
			leaky = r
		}
	}
	leaky.Prefetch = true
	store := memstore.New(memstore.Options{})
	defer store.Close()
	bound, err := set.Bind(store, rules.BindOptions{})
	var errs *rules.Errors
	if bound != nil || !errors.As(err, &errs) || len(*errs) != 1 {
		t.Fatalf("Bind = %v, %v; want one problem", bound, err)
	}
	want := "bind.yaml:8: d.leaky: " + strings.TrimPrefix(ratelimit.LeakyBucket.Prefetchable().Error(), "ratelimit: ")
	if got := (*errs)[0].Error(); got != want {
		t.Errorf("problem %q, want %q", got, want)
	}
}
