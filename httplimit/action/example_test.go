package action_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"

	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/identity"
)

// One descriptor of a generic key and the caller's identity: the entries
// an anonymous caller and an authenticated one get.
func ExampleDescriptor() {
	d := action.Descriptor{Actions: []action.Action{action.GenericKey{DescriptorValue: "api"}, action.IdentityKey{}}}
	r := httptest.NewRequest("GET", "/v1/charges", nil)
	for _, id := range []identity.Identity{
		{IP: netip.MustParseAddr("192.0.2.7")},
		{User: "alice", Authenticated: true, IP: netip.MustParseAddr("192.0.2.7")},
	} {
		for i, a := range d.Actions {
			e, ok := a.Entry(r, id)
			if i > 0 {
				fmt.Print(", ")
			}
			fmt.Printf("%s=%s %v", e.Key, e.Value, ok)
		}
		fmt.Println()
	}
	// Output:
	// generic_key=api true, remote_address=192.0.2.7 true
	// generic_key=api true, user=alice true
}

// Check names what is wrong with an action, in Envoy's field names.
func ExampleCheck() {
	_, problems := action.Check(action.RequestHeaders{HeaderName: "X Bad", DescriptorKey: "k"})
	for _, p := range problems {
		fmt.Println(p.Path+":", p.Msg)
	}
	// Output:
	// request_headers.header_name: "X Bad" is not a header name (an RFC 9110 token): Go's server refuses requests that carry it
}
