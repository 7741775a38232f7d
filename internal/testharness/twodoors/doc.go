// Package twodoors holds the differential test between sluice's two front
// doors: the gateway's net/http middleware (httplimit) and the Envoy rate
// limit service (rls). Both resolve descriptors through rules.Set.Resolve;
// the test feeds random rule files and random request sequences to both,
// on memory stores sharing one clock, and demands the same decisions,
// remaining counts and reset times.
//
// The doors are allowed to differ in one thing, how they charge a request
// that one of several limits denies: the gateway charges none of the
// others (it peeks first), the RLS charges every descriptor as
// envoyproxy/ratelimit does. The test compares sequences up to such a
// request and then starts a new one.
//
// It has no non-test code: this file only documents the package.
package twodoors
