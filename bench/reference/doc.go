// Package reference checks sluice's limiter core against the references it
// claims to match, running the references themselves rather than tables
// copied from them:
//
//   - every token-bucket table of ratelimittest.AdmitTables is replayed
//     against golang.org/x/time/rate, which proves the tables;
//   - random sequences (µs timestamps, rates that do not divide their
//     period, weighted costs) go through sluice's TokenBucket in memstore,
//     through x/time/rate's AllowN at the same instants, and through an
//     exact integer model of the token bucket, and the admits are compared;
//   - random sequences go through sluice's GCRA and an independent
//     transcription of redis-cell's CL.THROTTLE (checked against
//     redis-cell's own test case), and every reported number is compared.
//
// It lives in the bench module so that x/time never enters sluice's own
// module graph. The tests run in CI (scripts/test runs this module's tests).
package reference
