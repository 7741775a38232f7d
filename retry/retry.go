package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/backoff"
	"github.com/sluicehq/sluice/internal/tick"
)

// Defaults of the zero Options.
const (
	DefaultMaxAttempts = 7
	DefaultMaxDelay    = 60 * time.Second
)

// Sentinel errors, matched with errors.Is against the errors Do returns.
var (
	// ErrExhausted: every attempt allowed by MaxAttempts failed.
	ErrExhausted = errors.New("retry: attempts exhausted")
	// ErrDelayTooLong: the server asked for a delay longer than MaxDelay.
	ErrDelayTooLong = errors.New("retry: server delay exceeds the maximum")
	// ErrBudgetExhausted: the retry budget had no token for another retry.
	ErrBudgetExhausted = errors.New("retry: retry budget exhausted")
)

// Options configures Do. The zero value is the default: 7 attempts, the
// recommended backoff, waits of at most 60 s, no budget.
type Options struct {
	// MaxAttempts is the most calls of the operation, the first included.
	// Zero means DefaultMaxAttempts (7); 1 disables retries.
	MaxAttempts int
	// Backoff computes the wait before each retry when the operation gave
	// no delay of its own. Nil means backoff.Recommended (equal jitter,
	// 500 ms base, 60 s cap), which never retries at once after a failure.
	Backoff backoff.Strategy
	// MaxDelay is the longest single wait. A backoff delay is capped to it;
	// a server delay (WithDelay) longer than it fails at once with a
	// DelayTooLongError. Zero means DefaultMaxDelay (60 s).
	MaxDelay time.Duration
	// Budget, when set, must hold a token for every retry; Do deposits into
	// it on success.
	Budget *Budget
	// Retryable reports whether an error is worth retrying. Nil means every
	// error except Permanent ones and the context's own errors.
	Retryable func(error) bool
	// OnRetry, when set, is called before each wait.
	OnRetry func(Event)
	// Logger receives a debug record for each retry. Nil means no logging.
	Logger *slog.Logger
}

// Event describes a retry about to happen.
type Event struct {
	Attempt     int           // the attempt that failed, from 1
	Err         error         // what it returned
	Delay       time.Duration // the wait before the next attempt
	ServerDelay bool          // Delay came from the server (WithDelay)
}

// Op is one attempt of an operation. attempt counts from 1.
type Op func(ctx context.Context, attempt int) error

// Do calls op until it returns nil, a Permanent error, or the options stop
// it, waiting between attempts. It returns nil on success, the unwrapped
// error of a Permanent failure, or one of ExhaustedError,
// DelayTooLongError, BudgetError and InterruptedError, each of which wraps
// the last error op returned.
func Do(ctx context.Context, opts Options, op Op) error {
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return &InterruptedError{Attempts: attempt - 1, Cause: err}
		}
		err := op(ctx, attempt)
		if err == nil {
			opts.Budget.Deposit()
			return nil
		}
		if _, ok := errors.AsType[*PermanentError](err); !ok {
			if cerr := ctx.Err(); cerr != nil {
				return &InterruptedError{Attempts: attempt, Cause: cerr, Err: err}
			}
		}
		deadline, _ := ctx.Deadline()
		s := Next(opts, attempt, err, time.Now(), deadline)
		if s.Err != nil {
			return s.Err
		}
		if opts.OnRetry != nil {
			opts.OnRetry(Event{Attempt: attempt, Err: err, Delay: s.Delay, ServerDelay: s.ServerDelay})
		}
		if opts.Logger != nil {
			opts.Logger.LogAttrs(ctx, slog.LevelDebug, "retry",
				slog.Int("attempt", attempt), slog.Duration("delay", s.Delay),
				slog.Bool("server_delay", s.ServerDelay), slog.String("error", err.Error()))
		}
		if cerr := Sleep(ctx, s.Delay); cerr != nil {
			return &InterruptedError{Attempts: attempt, Cause: cerr, Err: err}
		}
	}
}

// Step is what Next decides after a failed attempt: wait Delay and try
// again, or stop with Err.
type Step struct {
	Delay       time.Duration // the wait before the next attempt
	ServerDelay bool          // Delay is the server's (WithDelay), not the backoff's
	Err         error         // non-nil: stop and return it
}

// Next is Do's decision after attempt failed with err, as a pure step: time
// is an input (now, and the deadline, zero for none) and nothing sleeps, so
// that a simulation in virtual time runs the same retry logic as Do, which
// is Next plus the sleeping, the context and the callbacks. Its only effect
// is the withdrawal from opts.Budget for a retry. err must not be nil.
func Next(opts Options, attempt int, err error, now, deadline time.Time) Step {
	if p, ok := errors.AsType[*PermanentError](err); ok {
		return Step{Err: p.Err}
	}
	if opts.Retryable != nil && !opts.Retryable(err) {
		return Step{Err: err}
	}
	maxAttempts := opts.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = DefaultMaxAttempts
	}
	maxDelay := opts.MaxDelay
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	if attempt >= maxAttempts {
		return Step{Err: &ExhaustedError{Attempts: attempt, Err: err}}
	}
	var delay time.Duration
	server := false
	if opts.Backoff != nil {
		delay = opts.Backoff.Delay(attempt)
	} else {
		delay = backoff.Recommended().Delay(attempt)
	}
	if de, ok := errors.AsType[*DelayError](err); ok && de.Delay > 0 {
		if de.Delay > maxDelay {
			return Step{Err: &DelayTooLongError{Attempts: attempt, Delay: de.Delay, Max: maxDelay, Err: err}}
		}
		delay, server = de.Delay, true
	}
	delay = min(max(delay, 0), maxDelay)
	if !deadline.IsZero() && deadline.Sub(now) < delay {
		return Step{Err: &InterruptedError{Attempts: attempt, Cause: context.DeadlineExceeded, Err: err, Wait: delay}}
	}
	if !opts.Budget.Withdraw() {
		return Step{Err: &BudgetError{Attempts: attempt, Err: err}}
	}
	return Step{Delay: delay, ServerDelay: server}
}

// Sleep waits for d or until ctx is done, returning ctx's error in the
// latter case. A d ≤ 0 returns at once (nil, unless ctx is done).
func Sleep(ctx context.Context, d time.Duration) error { return tick.Sleep(ctx, d) }

// Permanent wraps err so that Do returns it without retrying. It returns nil
// for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// PermanentError marks an error Do must not retry.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// WithDelay wraps err with the delay the server asked for (its
// Retry-After), which Do waits instead of the backoff. It returns nil for a
// nil err; a delay ≤ 0 leaves the backoff in charge.
func WithDelay(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &DelayError{Err: err, Delay: d}
}

// DelayError is a retryable error carrying the server's delay.
type DelayError struct {
	Err   error
	Delay time.Duration
}

func (e *DelayError) Error() string { return e.Err.Error() }
func (e *DelayError) Unwrap() error { return e.Err }

// ExhaustedError reports that every attempt failed. It matches
// ErrExhausted and unwraps to the last attempt's error.
type ExhaustedError struct {
	Attempts int
	Err      error // the last attempt's error
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("retry: gave up after %s: %v", plural(e.Attempts), e.Err)
}
func (e *ExhaustedError) Unwrap() error        { return e.Err }
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// DelayTooLongError reports a server delay longer than the caller's
// maximum: Do stops instead of retrying early. It matches ErrDelayTooLong.
type DelayTooLongError struct {
	Attempts int
	Delay    time.Duration // what the server asked for
	Max      time.Duration // Options.MaxDelay
	Err      error         // the last attempt's error
}

func (e *DelayTooLongError) Error() string {
	return fmt.Sprintf("retry: server asked to wait %v, longer than the maximum %v, after %s: %v",
		e.Delay, e.Max, plural(e.Attempts), e.Err)
}
func (e *DelayTooLongError) Unwrap() error        { return e.Err }
func (e *DelayTooLongError) Is(target error) bool { return target == ErrDelayTooLong }

// BudgetError reports that the retry budget refused a retry. It matches
// ErrBudgetExhausted.
type BudgetError struct {
	Attempts int
	Err      error // the last attempt's error
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("retry: retry budget exhausted after %s: %v", plural(e.Attempts), e.Err)
}
func (e *BudgetError) Unwrap() error        { return e.Err }
func (e *BudgetError) Is(target error) bool { return target == ErrBudgetExhausted }

// InterruptedError reports that the context ended the retries: it was
// cancelled or its deadline passed, or the next wait would have ended after
// the deadline (Do does not sleep into a deadline it cannot beat). It
// matches the context error in Cause and the last attempt's error.
type InterruptedError struct {
	Attempts int
	Cause    error         // context.Canceled or context.DeadlineExceeded
	Err      error         // the last attempt's error, nil if none was made
	Wait     time.Duration // the wait that would have passed the deadline, if that was the reason
}

func (e *InterruptedError) Error() string {
	msg := "retry: " + e.Cause.Error()
	if e.Wait > 0 {
		msg = fmt.Sprintf("retry: waiting %v would pass the deadline", e.Wait)
	}
	if e.Err == nil {
		return msg
	}
	return fmt.Sprintf("%s, after %s: %v", msg, plural(e.Attempts), e.Err)
}
func (e *InterruptedError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Cause}
	}
	return []error{e.Cause, e.Err}
}

func plural(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}
