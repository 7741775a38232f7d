// Package inflight measures sluice's in-flight limit (inflight.Memory:
// keyed leases with a TTL) side by side with failsafe-go's bulkhead (one
// unkeyed semaphore, no expiry), the anchor of issue 17: the cost of
// entering and leaving, serial and parallel.
//
//	cd bench && go test -run XXX -bench . -benchtime=300ms -count=6 ./inflight
package inflight
