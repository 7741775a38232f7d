// Package gcra is the generic cell rate algorithm as a pure step: one
// timestamp of state per key (the theoretical arrival time, TAT), no clock,
// no I/O. It serves three of sluice's algorithms:
//
//   - GCRA, with the numbers redis-cell's CL.THROTTLE reports;
//   - TokenBucket: a bucket of Burst tokens refilled continuously at
//     Rate/Period admits a request exactly when GCRA does, since the tokens
//     in the bucket at time now are (Burst·T − (TAT − now))/T;
//   - LeakyBucket: the queue admits what the meter admits (a queue of Burst
//     slots draining one every T) and delays each admitted request until
//     the requests ahead of it have drained: Delay = max(TAT, now) − now.
//     This is nginx limit_req without nodelay, whose burst is Burst−1.
//
// With T = Period/Rate (the emission interval) and τ = Burst·T (the delay
// variation tolerance), a request of cost n at time now is admitted when
// max(TAT, now) + n·T − now ≤ τ, and then TAT becomes max(TAT, now) + n·T.
// A TAT at or before now is a full bucket, the same as an absent key, so a
// store may drop such keys at any time.
package gcra
