package rules_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rules"
)

// A front door binds its rules to its store once, at load and on every
// reload, and charges each resolved check through Decide.
func ExampleSet_Bind() {
	cfg, _ := rules.Parse("api.yaml", []byte(`
domain: api
descriptors:
  - key: user
    rate_limit: {algorithm: gcra, unit: second, requests_per_unit: 2}
  - key: tenant
    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 5000, prefetch: true}
`))
	set, _ := rules.NewSet(cfg)
	store := memstore.New(memstore.Options{})
	defer store.Close()
	// No prefetch view on the memory store: the prefetch: true rule is exact.
	for _, r := range set.PrefetchRules() {
		fmt.Printf("warning: %s:%d: %s: prefetch: true has no effect on the memory store\n", r.File, r.Line, r.Key)
	}
	bound, err := set.Bind(store, rules.BindOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	in := rules.Input{Domain: "api", Descriptors: []rules.Descriptor{{Entries: []rules.Entry{{Key: "user", Value: "alice"}}, Hits: 1}}}
	for range 3 {
		cs, _ := bound.Resolve(nil, in)
		d, _ := cs[0].Decide(context.Background(), store, cs[0].Request)
		fmt.Println(cs[0].Policy(), d.Allowed, d.Remaining)
	}
	// Output:
	// warning: api.yaml:6: api.tenant: prefetch: true has no effect on the memory store
	// api.user true 1
	// api.user true 0
	// api.user false 0
}
