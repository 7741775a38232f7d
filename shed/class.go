package shed

import (
	"errors"
	"fmt"
	"strconv"
)

// Class is a priority class: its index in a Classes order. Class 0 is shed
// first; the last class (the critical traffic) is shed last.
type Class uint8

// MaxClasses is the most classes an order may name.
const MaxClasses = 16

// DefaultClasses is Stripe's shedding order (layer 4): test-mode
// traffic first, then reads (GET), then writes (POST), critical requests
// last.
var DefaultClasses = []string{"test", "get", "post", "critical"}

// ErrClasses is wrapped by every error about a class order.
var ErrClasses = errors.New("shed: invalid class order")

// Classes is a shedding order: the first name is shed first, the last one
// last. Build it with NewClasses; the zero value has no classes.
type Classes struct {
	names []string
}

// NewClasses returns the order names (DefaultClasses when empty). Names
// must be unique, non-empty, at most 64 bytes of [a-z0-9_-], and at most
// MaxClasses of them.
func NewClasses(names ...string) (Classes, error) {
	if len(names) == 0 {
		names = DefaultClasses
	}
	if len(names) > MaxClasses {
		return Classes{}, fmt.Errorf("%w: %d classes, at most %d", ErrClasses, len(names), MaxClasses)
	}
	for i, n := range names {
		if err := validName(n); err != nil {
			return Classes{}, fmt.Errorf("%w: class %d: %v", ErrClasses, i, err)
		}
		for _, m := range names[:i] {
			if m == n {
				return Classes{}, fmt.Errorf("%w: class %q named twice", ErrClasses, n)
			}
		}
	}
	return Classes{names: append([]string(nil), names...)}, nil
}

func validName(n string) error {
	if n == "" {
		return errors.New("empty name")
	}
	if len(n) > 64 {
		return errors.New("name longer than 64 bytes")
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("name %s: want lowercase letters, digits, _ and -", strconv.Quote(n))
		}
	}
	return nil
}

// Len returns the number of classes.
func (c Classes) Len() int { return len(c.names) }

// Names returns the names in shedding order.
func (c Classes) Names() []string { return append([]string(nil), c.names...) }

// Lookup returns the class named name.
func (c Classes) Lookup(name string) (Class, bool) {
	for i, n := range c.names {
		if n == name {
			return Class(i), true
		}
	}
	return 0, false
}

// Name returns the name of cl, or "class(N)" when cl is not in the order.
func (c Classes) Name(cl Class) string {
	if int(cl) < len(c.names) {
		return c.names[cl]
	}
	return "class(" + strconv.Itoa(int(cl)) + ")"
}

// Last returns the class shed last (the critical one).
func (c Classes) Last() Class { return Class(max(len(c.names)-1, 0)) }
