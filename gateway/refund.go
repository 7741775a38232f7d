package gateway

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/internal/config/yamlnode"
	"github.com/sluicehq/sluice/rules"
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

// GatewayFailures is a set of the gateway's own failures that a route's
// refund_on names: its 504 when the upstream did not answer within
// upstream_timeout (upstream_timeout), its 502 when it could not reach the
// upstream or got no valid answer (upstream_unreachable). A 502 or 504 in
// a StatusSet is the upstream's own answer only: a caller who can make
// the gateway time out (a slow query) or fail to connect is not refunded
// for it unless the route says so.
type GatewayFailures uint8

const (
	UpstreamTimeout     GatewayFailures = 1 << iota // upstream_timeout: the gateway's own 504
	UpstreamUnreachable                             // upstream_unreachable: the gateway's own 502
)

// gatewayFailureNames are refund_on's names for GatewayFailures, by bit.
var gatewayFailureNames = [...]string{"upstream_timeout", "upstream_unreachable"}

// refundHook returns the httplimit.Middleware.RefundOn hook of a route:
// nil (never) when it refunds nothing; else a response the proxy answered
// itself (markFailure) is refunded when own names its failure, and any
// other when its status is in s (a bitmap lookup of the statuses 200 to
// 599; ParseStatusRange keeps every range within them).
func refundHook(s StatusSet, own GatewayFailures) func(*http.Request, int) bool {
	if len(s) == 0 && own == 0 {
		return nil
	}
	var bits [7]uint64 // 200..647
	for _, r := range s {
		for c := max(r.Lo, 200); c <= min(r.Hi, 599); c++ {
			bits[(c-200)/64] |= 1 << ((c - 200) % 64)
		}
	}
	return func(r *http.Request, status int) bool {
		if f := failureOf(r.Context()); f != 0 {
			return own&f != 0
		}
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
		return 0, fmt.Errorf("%s, got %q", refundOnWant, s)
	}
	n, _ := strconv.Atoi(s)
	if n < 200 || n > 599 {
		return 0, fmt.Errorf("status %d is not a final response status (200 to 599)", n)
	}
	return n, nil
}

// refunds returns the decoders of route r's refund_on and refund_budget,
// and done, which warns (once the route is read) about a budget on a
// route that refunds nothing.
func (d *decoder) refunds(r *Route, path string, c *Config) (on, budget func(k, v *yaml.Node), done func()) {
	budgetLine := 0
	on = func(_, v *yaml.Node) { r.RefundOn, r.RefundOnGateway = d.refundOn(v, yamlnode.Join(path, "refund_on")) }
	budget = func(_, v *yaml.Node) {
		r.RefundBudget, budgetLine = d.refundBudget(v, yamlnode.Join(path, "refund_budget")), v.Line
	}
	done = func() {
		if budgetLine != 0 && len(r.RefundOn) == 0 && r.RefundOnGateway == 0 {
			c.Warnings = append(c.Warnings, rules.Problem{File: d.file, Line: budgetLine, Path: yamlnode.Join(path, "refund_budget"),
				Msg: "warning: refund_budget without refund_on: nothing is refunded"}.Error())
		}
	}
	return on, budget, done
}

// refundOn reads a route's refund_on: a list of statuses, ranges, classes
// and the names of the gateway's own failures, each problem reported at
// its line.
func (d *decoder) refundOn(n *yaml.Node, path string) (StatusSet, GatewayFailures) {
	var set StatusSet
	var own GatewayFailures
	d.list(n, path, func(_ int, v *yaml.Node, p string) {
		v = d.deref(v)
		if v == nil {
			return
		}
		if v.Kind != yaml.ScalarNode {
			d.add(v.Line, p, "%s, got %s", refundOnWant, yamlnode.Kind(v))
			return
		}
		for i, name := range gatewayFailureNames {
			if v.Value == name {
				own |= 1 << i
				return
			}
		}
		r, err := ParseStatusRange(v.Value)
		if err != nil {
			d.add(v.Line, p, "%v", err)
			return
		}
		set = append(set, r)
	})
	return set, own
}

// refundOnWant says what an item of refund_on may be.
const refundOnWant = "want a status code (503), a range (500-599), a class (5xx), upstream_timeout or upstream_unreachable"

// refundBudget reads a route's refund_budget: a fraction of the limit
// above 0 and at most 1 (httplimit.Middleware.RefundBudget).
func (d *decoder) refundBudget(v *yaml.Node, path string) float64 {
	f, err := strconv.ParseFloat(d.str(v, path), 64)
	if err != nil || !(f > 0 && f <= 1) || v.Tag == "!!str" {
		d.add(v.Line, path, "want a fraction of the limit above 0 and at most 1, such as 0.5, got %s", yamlnode.Kind(v))
		return 0
	}
	return f
}
