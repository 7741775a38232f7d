package gateway

import (
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
)

// StatusRange is an inclusive range of HTTP status codes.
type StatusRange struct{ Lo, Hi int }

// StatusSet is a route's refund_on: the response statuses on which what
// the request was charged is given back (httplimit.Middleware.RefundOn).
// The empty set never refunds.
type StatusSet []StatusRange

// Contains reports whether status is in s.
func (s StatusSet) Contains(status int) bool {
	for _, r := range s {
		if r.Lo <= status && status <= r.Hi {
			return true
		}
	}
	return false
}

// refundOn returns the RefundOn hook for s: nil (never) when s is empty,
// else a bitmap lookup of the statuses 200 to 599 (ParseStatusRange keeps
// every range within them).
func (s StatusSet) refundOn() func(int) bool {
	if len(s) == 0 {
		return nil
	}
	var bits [7]uint64 // 200..647
	for _, r := range s {
		for c := max(r.Lo, 200); c <= min(r.Hi, 599); c++ {
			bits[(c-200)/64] |= 1 << ((c - 200) % 64)
		}
	}
	return func(status int) bool {
		c := status - 200
		return c >= 0 && c < 400 && bits[c/64]&(1<<(c%64)) != 0
	}
}

// ParseStatusRange reads one item of refund_on: a status code ("503"), an
// inclusive range ("500-599") or a class ("5xx"). Statuses run from 200 to
// 599: a 1xx is not a final answer, and nothing else is a status.
func ParseStatusRange(s string) (StatusRange, error) {
	t := strings.TrimSpace(s)
	if len(t) == 3 && strings.HasSuffix(strings.ToLower(t), "xx") && t[0] >= '2' && t[0] <= '5' {
		c := int(t[0]-'0') * 100
		return StatusRange{c, c + 99}, nil
	}
	lo, hi, isRange := strings.Cut(t, "-")
	a, err := parseStatus(lo)
	if err != nil {
		return StatusRange{}, err
	}
	if !isRange {
		return StatusRange{a, a}, nil
	}
	b, err := parseStatus(hi)
	if err != nil {
		return StatusRange{}, err
	}
	if b < a {
		return StatusRange{}, fmt.Errorf("range %q ends before it starts", s)
	}
	return StatusRange{a, b}, nil
}

func parseStatus(s string) (int, error) {
	s = strings.TrimSpace(s)
	if len(s) != 3 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("want a status code (503), a range (500-599) or a class (5xx), got %q", s)
	}
	n, _ := strconv.Atoi(s)
	if n < 200 || n > 599 {
		return 0, fmt.Errorf("status %d is not a final response status (200 to 599)", n)
	}
	return n, nil
}

// refundOn reads a route's refund_on: a list of statuses, ranges and
// classes, each problem reported at its line.
func (d *decoder) refundOn(n *yaml.Node, path string) StatusSet {
	var set StatusSet
	d.list(n, path, func(_ int, v *yaml.Node, p string) {
		v = d.deref(v)
		if v == nil {
			return
		}
		if v.Kind != yaml.ScalarNode {
			d.add(v.Line, p, "want a status code (503), a range (500-599) or a class (5xx), got %s", yamlnode.Kind(v))
			return
		}
		r, err := ParseStatusRange(v.Value)
		if err != nil {
			d.add(v.Line, p, "%v", err)
			return
		}
		set = append(set, r)
	})
	return set
}
