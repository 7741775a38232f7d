package overload

import (
	"context"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/platinummonkey/go-concurrency-limits/core"
	"github.com/platinummonkey/go-concurrency-limits/limit"
	"github.com/platinummonkey/go-concurrency-limits/limiter"
	"github.com/platinummonkey/go-concurrency-limits/strategy"
	"github.com/zeromicro/go-zero/core/load"
	"github.com/zeromicro/go-zero/core/logx"

	"github.com/sluicehq/sluice/sim"
)

func init() {
	// go-zero logs every drop and a stat line a minute; the comparison
	// prints its own table.
	load.DisableLog()
	logx.Disable()
}

// failsafeAdaptive adapts failsafe-go's adaptivelimiter (defaults:
// limits 1..200 from 20, quantile 0.9).
type failsafeAdaptive struct {
	l adaptivelimiter.AdaptiveLimiter[any]
}

func (a failsafeAdaptive) Admit() (func(bool), bool) {
	p, ok := a.l.TryAcquirePermit()
	if !ok {
		return nil, false
	}
	return func(ok bool) {
		if ok {
			p.Record()
		} else {
			p.Drop()
		}
	}, true
}

func (a failsafeAdaptive) Limit() int { return a.l.Limit() }

// failsafeBulkhead adapts failsafe-go's bulkhead: a fixed limit, set to
// the full capacity (it does not see the capacity halve).
type failsafeBulkhead struct {
	b     bulkhead.Bulkhead[any]
	limit int
}

func (a failsafeBulkhead) Admit() (func(bool), bool) {
	if !a.b.TryAcquirePermit() {
		return nil, false
	}
	return func(bool) { a.b.ReleasePermit() }, true
}

func (a failsafeBulkhead) Limit() int { return a.limit }

// platinum adapts a go-concurrency-limits DefaultLimiter.
type platinum struct{ l *limiter.DefaultLimiter }

func (a platinum) Admit() (func(bool), bool) {
	ls, ok := a.l.Acquire(context.Background())
	if !ok {
		return nil, false
	}
	return func(ok bool) {
		if ok {
			ls.OnSuccess()
		} else {
			ls.OnDropped()
		}
	}, true
}

func (a platinum) Limit() int { return a.l.EstimatedLimit() }

// newPlatinum wraps l in a DefaultLimiter with the library's own default
// windows (1 s, at least 100 samples) and a simple strategy.
func newPlatinum(l core.Limit) *limiter.DefaultLimiter {
	d, err := limiter.NewDefaultLimiter(l, 1e9, 1e9, 1e5, 100, strategy.NewSimpleStrategy(l.EstimatedLimit()),
		limit.NoopLimitLogger{}, core.EmptyMetricRegistryInstance)
	if err != nil {
		panic(err) // the arguments are constants
	}
	return d
}

// gozero adapts go-zero's adaptive shedder (CPU threshold 90%).
type gozero struct{ s load.Shedder }

func (a gozero) Admit() (func(bool), bool) {
	p, err := a.s.Allow()
	if err != nil {
		return nil, false
	}
	return func(ok bool) {
		if ok {
			p.Pass()
		} else {
			p.Fail()
		}
	}, true
}

func (a gozero) Limit() int { return -1 }

// Contenders returns sluice's limiters, the oracle and no limit (from
// package sim) and the peers, each with its library's defaults; capacity
// is the model's full capacity (the bulkhead's fixed size).
func Contenders(capacity int) []sim.OverloadContender {
	cs := sim.OverloadContenders()
	return append(cs,
		sim.OverloadContender{Name: "failsafe-adaptivelimiter", New: func(func() time.Time, uint64, func() int) sim.Admitter {
			return failsafeAdaptive{adaptivelimiter.NewBuilder[any]().Build()}
		}},
		sim.OverloadContender{Name: "failsafe-bulkhead", New: func(func() time.Time, uint64, func() int) sim.Admitter {
			return failsafeBulkhead{bulkhead.New[any](uint(capacity)), capacity}
		}},
		sim.OverloadContender{Name: "platinummonkey-vegas", New: func(func() time.Time, uint64, func() int) sim.Admitter {
			return platinum{newPlatinum(limit.NewDefaultVegasLimit("vegas", limit.NoopLimitLogger{}, core.EmptyMetricRegistryInstance))}
		}},
		sim.OverloadContender{Name: "platinummonkey-gradient2", New: func(func() time.Time, uint64, func() int) sim.Admitter {
			return platinum{newPlatinum(limit.NewDefaultGradient2Limit("gradient2", limit.NoopLimitLogger{}, core.EmptyMetricRegistryInstance))}
		}},
		sim.OverloadContender{Name: "gozero-shedder", New: func(func() time.Time, uint64, func() int) sim.Admitter {
			return gozero{load.NewAdaptiveShedder()}
		}},
	)
}
