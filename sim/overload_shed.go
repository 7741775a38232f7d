package sim

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/inflight"
	"github.com/sluicehq/sluice/shed"
)

// classMix is the traffic of the overload model by priority class: Shares[i]
// is the share of the arrivals in class i of Classes (shed.Class i, the
// first shed first, the last the critical one). The zero value is
// defaultClassMix.
type classMix struct {
	Classes shed.Classes
	Shares  []float64
}

// defaultCritical is the share of critical traffic in the default mix
// (the shedders' target: 30% critical at 2x).
const defaultCritical = 0.3

// newClassMix returns the mix of classes (shed.DefaultClasses when it has
// none) where the last class, the critical one, has share critical and the
// classes before it split the rest evenly.
func newClassMix(critical float64, classes shed.Classes) (classMix, error) {
	if classes.Len() == 0 {
		classes, _ = shed.NewClasses()
	}
	n := classes.Len()
	switch {
	case !(critical >= 0 && critical <= 1):
		return classMix{}, fmt.Errorf("sim: critical share %v: want 0 to 1", critical)
	case n == 1 && critical != 1:
		return classMix{}, fmt.Errorf("sim: one class, %q: all the traffic is critical, not %v", classes.Name(0), critical)
	}
	m := classMix{Classes: classes, Shares: make([]float64, n)}
	for i := range n - 1 {
		m.Shares[i] = (1 - critical) / float64(n-1)
	}
	m.Shares[n-1] = critical
	return m, nil
}

// defaultClassMix is shed.DefaultClasses (test, get, post, critical) with
// 30% critical and 70/3% in each of the others.
func defaultClassMix() classMix {
	m, _ := newClassMix(defaultCritical, shed.Classes{})
	return m
}

func (m classMix) withDefaults() (classMix, error) {
	if m.Classes.Len() == 0 && m.Shares == nil {
		return defaultClassMix(), nil
	}
	if m.Classes.Len() == 0 {
		return m, fmt.Errorf("sim: class mix: %d shares and no classes", len(m.Shares))
	}
	if len(m.Shares) != m.Classes.Len() {
		return m, fmt.Errorf("sim: class mix: %d shares for %d classes", len(m.Shares), m.Classes.Len())
	}
	sum := 0.0
	for i, s := range m.Shares {
		if !(s >= 0 && s <= 1) {
			return m, fmt.Errorf("sim: class mix: share %v of %s: want 0 to 1", s, m.Classes.Name(shed.Class(i)))
		}
		sum += s
	}
	if math.Abs(sum-1) > 1e-6 {
		return m, fmt.Errorf("sim: class mix: shares add up to %v, want 1", sum)
	}
	return m, nil
}

// draw returns a class at random in proportion to the shares.
func (m classMix) draw(r *rand.Rand) shed.Class {
	u := r.Float64()
	for i, s := range m.Shares {
		if u < s {
			return shed.Class(i)
		}
		u -= s
	}
	return m.Classes.Last() // rounding: the shares add up to 1 within 1e-6
}

// classAdmitter is an Admitter that knows priorities: the model calls
// AdmitClass, with the class of each request, instead of Admit. Limiters
// that do not implement it see every request alike (they ignore the
// class), and their rows have no critical_success.
type classAdmitter interface {
	Admitter
	AdmitClass(c shed.Class) (release func(ok bool), admitted bool)
}

// shedOptions configure the shedders of [shedContenders]. The zero value
// of each field is its documented default.
type shedOptions struct {
	// Workers is the server's worker count (the model's Capacity): the
	// utilization shedder's capacity, the unit of FleetCap. Required.
	Workers int
	// Mix is the class order; zero means defaultClassMix.
	Mix classMix
	// Ramp is the utilization shedder's ramp; zero means Stripe's 120 s
	// (shed.DefaultRamp). Its threshold (0.8) and interval (1 s) are
	// Stripe's too.
	Ramp time.Duration
	// FleetCap is the fleet shedder's in-flight cap; zero means 1.5 x
	// Workers (an I/O-bound server serves more than its workers at once,
	// each slower: 1.5x keeps latency at most 1.5x the no-load one).
	FleetCap int
	// Reserved is the share of FleetCap kept for critical requests: a
	// request of another class is admitted only while the fleet's whole
	// in-flight count (every class) is below floor(FleetCap x (1 -
	// Reserved)). Zero means 1/3: with the default cap the others may
	// fill the workers, and critical requests alone go past them, up to
	// 1.5x.
	Reserved float64
	// GradientReserved is the reserve of sluice-shed-gradient, a share
	// of the gradient limiter's current limit; zero means 0.5.
	GradientReserved float64
}

func (o shedOptions) withDefaults() (shedOptions, error) {
	var err error
	if o.Mix, err = o.Mix.withDefaults(); err != nil {
		return o, err
	}
	if o.Ramp == 0 {
		o.Ramp = shed.DefaultRamp
	}
	if o.FleetCap == 0 {
		o.FleetCap = o.Workers * 3 / 2
	}
	if o.Reserved == 0 {
		o.Reserved = 1.0 / 3
	}
	if o.GradientReserved == 0 {
		o.GradientReserved = 0.5
	}
	switch {
	case o.Workers < 1:
		return o, fmt.Errorf("sim: shedders: %d workers: want at least 1", o.Workers)
	case o.Ramp < 0:
		return o, fmt.Errorf("sim: shedders: negative ramp %v", o.Ramp)
	case o.FleetCap < 1:
		return o, fmt.Errorf("sim: shedders: fleet cap %d: want at least 1", o.FleetCap)
	case !(o.Reserved > 0 && o.Reserved < 1), !(o.GradientReserved > 0 && o.GradientReserved < 1):
		return o, fmt.Errorf("sim: shedders: reserved shares %v, %v: want above 0 and below 1", o.Reserved, o.GradientReserved)
	}
	return o, nil
}

// shedContenders returns sluice's load shedders as overload contenders:
//
//   - sluice-shed-utilization: shed.Utilization (Stripe's layer 4) with
//     Stripe's figures (above 0.8 of Workers, a 120 s ramp, every second)
//     on the simulation's clock;
//   - sluice-shed-fleet: shed.Fleet (layer 3) on an inflight.Memory store on
//     the simulation's clock, FleetCap with Reserved kept for critical;
//   - sluice-shed-stack: both, as Stripe layers them: the utilization
//     shedder first (it sheds by class, lowest first), then the fleet's
//     cap and reserve;
//   - sluice-shed-gradient: the fleet's reserve in front of sluice-gradient:
//     critical requests may use all of the gradient limiter's current
//     limit, the others shed.GeneralCap of it.
func shedContenders(o shedOptions) ([]OverloadContender, error) {
	classes := o.Mix.Classes
	// Every option is checked here, so the constructors below cannot fail.
	if _, err := shed.NewUtilization(shed.UtilizationOptions{Capacity: int64(o.Workers), Ramp: o.Ramp, Classes: classes}); err != nil {
		return nil, err
	}
	if _, err := shed.NewFleet(shed.FleetOptions{Store: inflight.NewMemory(inflight.MemoryOptions{}),
		Cap: int64(o.FleetCap), Reserved: o.Reserved, Classes: classes}); err != nil {
		return nil, err
	}
	return []OverloadContender{
		{"sluice-shed-utilization", func(now func() time.Time, _ uint64, _ func() int) Admitter {
			u, err := shed.NewUtilization(shed.UtilizationOptions{Capacity: int64(o.Workers), Ramp: o.Ramp,
				Classes: classes, Now: now})
			if err != nil {
				panic(err) // checked above
			}
			return utilizationAdmitter{u}
		}},
		{"sluice-shed-fleet", func(now func() time.Time, _ uint64, _ func() int) Admitter {
			// No TTL to speak of: requests here end within the model's
			// deadline or their own latency, and a lease outliving its TTL
			// would be reclaimed under a live request.
			f, err := shed.NewFleet(shed.FleetOptions{Store: inflight.NewMemory(inflight.MemoryOptions{Now: now}),
				Cap: int64(o.FleetCap), Reserved: o.Reserved, Classes: classes, TTL: inflight.MaxTTL})
			if err != nil {
				panic(err) // checked above
			}
			return fleetAdmitter{f}
		}},
		{"sluice-shed-stack", func(now func() time.Time, _ uint64, _ func() int) Admitter {
			u, err := shed.NewUtilization(shed.UtilizationOptions{Capacity: int64(o.Workers), Ramp: o.Ramp,
				Classes: classes, Now: now})
			if err != nil {
				panic(err) // checked above
			}
			f, err := shed.NewFleet(shed.FleetOptions{Store: inflight.NewMemory(inflight.MemoryOptions{Now: now}),
				Cap: int64(o.FleetCap), Reserved: o.Reserved, Classes: classes, TTL: inflight.MaxTTL})
			if err != nil {
				panic(err) // checked above
			}
			return stackAdmitter{utilizationAdmitter{u}, fleetAdmitter{f}}
		}},
		{"sluice-shed-gradient", func(now func() time.Time, seed uint64, _ func() int) Admitter {
			return &reserveAdmitter{l: adaptive.NewGradient(adaptive.GradientOptions{
				LimiterOptions: adaptive.LimiterOptions{Now: now, Seed: seed}}),
				reserved: o.GradientReserved, critical: classes.Last()}
		}},
	}, nil
}

// utilizationAdmitter adapts a shed.Utilization: it has no limit.
type utilizationAdmitter struct{ u *shed.Utilization }

func (a utilizationAdmitter) Admit() (func(bool), bool) { return a.AdmitClass(a.u.Classes().Last()) }

func (a utilizationAdmitter) AdmitClass(c shed.Class) (func(bool), bool) {
	if !a.u.Acquire(c) {
		return nil, false
	}
	return func(bool) { a.u.Release() }, true
}

func (a utilizationAdmitter) Limit() int { return -1 }

// fleetAdmitter adapts a shed.Fleet; its limit is the fleet's cap.
type fleetAdmitter struct{ f *shed.Fleet }

func (a fleetAdmitter) Admit() (func(bool), bool) { return a.AdmitClass(a.f.Classes().Last()) }

func (a fleetAdmitter) AdmitClass(c shed.Class) (func(bool), bool) {
	ctx := context.Background()
	l, d, err := a.f.Acquire(ctx, c)
	if err != nil || !d.Allowed {
		return nil, false // an in-memory store fails only when full of keys: it has one
	}
	return func(bool) { a.f.Release(ctx, l) }, true
}

func (a fleetAdmitter) Limit() int { return int(a.f.CapFor(a.f.Classes().Last())) }

// reserveAdmitter puts a fleet-style reserve in front of an adaptive
// limiter: critical requests may fill its limit, the others only
// shed.GeneralCap of it.
type reserveAdmitter struct {
	l        adaptive.Limiter
	reserved float64
	critical shed.Class
}

func (a *reserveAdmitter) Admit() (func(bool), bool) { return a.AdmitClass(a.critical) }

func (a *reserveAdmitter) AdmitClass(c shed.Class) (func(bool), bool) {
	if c < a.critical && int64(a.l.InFlight()) >= shed.GeneralCap(int64(a.l.Limit()), a.reserved) {
		return nil, false
	}
	return limiterAdmitter{a.l}.Admit()
}

func (a *reserveAdmitter) Limit() int { return a.l.Limit() }

// stackAdmitter admits a request that both of its shedders admit.
type stackAdmitter struct {
	u utilizationAdmitter
	f fleetAdmitter
}

func (a stackAdmitter) Admit() (func(bool), bool) { return a.AdmitClass(a.f.f.Classes().Last()) }

func (a stackAdmitter) AdmitClass(c shed.Class) (func(bool), bool) {
	ru, ok := a.u.AdmitClass(c)
	if !ok {
		return nil, false
	}
	rf, ok := a.f.AdmitClass(c)
	if !ok {
		ru(false)
		return nil, false
	}
	return func(ok bool) { rf(ok); ru(ok) }, true
}

func (a stackAdmitter) Limit() int { return a.f.Limit() }
