package rules

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// QuotaLimit returns a FixedWindow limit of n events whose window contains
// the whole of [start, end).
//
// Stores align FixedWindow windows to the Unix epoch, so a window of
// exactly one calendar month would not start on the first of the month.
// QuotaLimit picks instead a period P (at least end−start, at most
// ratelimit.MaxWindow, the longest a fixed window takes) such that one
// epoch-aligned window [k·P, (k+1)·P) covers [start, end): every request
// of the calendar period then counts in one window, and keying the state
// by the period's start (the caller's job) starts the next period from
// zero. The count is exact; the store's ResetAfter is not the period's end
// and the caller reports end−now itself.
func QuotaLimit(start, end time.Time, n int64) (ratelimit.Limit, error) {
	s, e := start.UnixNano(), end.UnixNano()
	l := e - s
	if s <= 0 || l <= 0 || l > int64(ratelimit.MaxWindow) {
		return ratelimit.Limit{}, fmt.Errorf("rules: cannot cover [%v, %v) with one window", start, end)
	}
	// k·P ≤ s and (k+1)·P ≥ e, i.e. P in [ceil(e/(k+1)), floor(s/k)],
	// which is non-empty for k ≤ s/l; a smaller k widens it.
	for k := s / l; k >= 1; k-- {
		lo := (e + k) / (k + 1) // ceil(e/(k+1))
		hi := s / k
		if lo <= hi && lo <= int64(ratelimit.MaxWindow) {
			lim := ratelimit.Limit{Rate: n, Period: time.Duration(lo), Burst: n}
			if err := lim.Validate(); err != nil {
				return ratelimit.Limit{}, err
			}
			return lim, nil
		}
	}
	return ratelimit.Limit{}, fmt.Errorf("rules: cannot cover [%v, %v) with one window", start, end)
}
