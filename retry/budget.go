package retry

import "sync"

// BudgetOptions configures a Budget. The zero value is the default.
type BudgetOptions struct {
	// Capacity is the most tokens the budget holds, and the number it starts
	// with: the most retries in a row a failing target receives. Zero means
	// 20.
	Capacity float64
	// Refill is the tokens each success puts back: the long-run ceiling on
	// retries per success. Zero means 0.1 (one retry per ten successes).
	Refill float64
}

// Budget is a retry budget: a token bucket that each retry spends one token
// from and each success refills by Refill. A target whose every request
// fails drains it, and then receives no retries at all, only first
// attempts, until successes refill it. It is safe for concurrent use.
type Budget struct {
	capacity, refill float64

	mu    sync.Mutex
	spent float64 // capacity - tokens, so that a zero Budget is full
}

// NewBudget returns a full budget.
func NewBudget(opts BudgetOptions) *Budget {
	b := &Budget{capacity: opts.Capacity, refill: opts.Refill}
	if !(b.capacity > 0) {
		b.capacity = 20
	}
	if !(b.refill > 0) {
		b.refill = 0.1
	}
	return b
}

// Withdraw spends one token for a retry and reports whether there was one.
// A nil Budget always allows.
func (b *Budget) Withdraw() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.capacity-b.spent < 1 {
		return false
	}
	b.spent++
	return true
}

// Deposit records a success, refilling the budget by Refill.
func (b *Budget) Deposit() {
	if b == nil {
		return
	}
	b.mu.Lock()
	b.spent = max(0, b.spent-b.refill)
	b.mu.Unlock()
}

// Tokens returns the tokens left: the retries the budget allows right now.
func (b *Budget) Tokens() float64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.capacity - b.spent
}

// Full reports whether the budget holds its full capacity, the state of a
// new budget: a full budget can be dropped and recreated without changing
// anything.
func (b *Budget) Full() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent == 0
}
