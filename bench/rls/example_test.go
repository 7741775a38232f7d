package rls_test

import (
	"fmt"

	"github.com/sluicehq/sluice/bench/rls"
)

// Stream is deterministic: the same seed gives the same requests, so both
// servers (and every run) see one stream.
func ExampleStream() {
	for _, r := range rls.Stream(1, 3, "run") {
		fmt.Printf("%d descriptor(s), hits_addend %d, first: %s=%s\n", len(r.Descriptors), r.HitsAddend,
			r.Descriptors[0].Entries[0].Key, r.Descriptors[0].Entries[0].Value)
	}
	// Output:
	// 1 descriptor(s), hits_addend 1, first: remote_address=10.0.0.1-run
	// 2 descriptor(s), hits_addend 0, first: user=u1-run
	// 2 descriptor(s), hits_addend 3, first: user=u5-run
}

// The sweep's rates are percentages of the reference server's capacity.
func ExampleParseFractions() {
	fs, err := rls.ParseFractions("10,25,50,100")
	fmt.Println(fs, err)
	_, err = rls.ParseFractions("10,fast")
	fmt.Println(err)
	// Output:
	// [0.1 0.25 0.5 1] <nil>
	// rls: bad percentage "fast" in "10,fast"
}
