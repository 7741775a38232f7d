package httpclient

import (
	"iter"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/sluicehq/sluice/retry"
)

// Budget is what a server announced about a client's allowance: how many
// requests it may still send before the allowance refills, and when.
type Budget struct {
	// Remaining is how many more requests the server will take before
	// Reset.
	Remaining int64
	// Reset is how long until the allowance refills.
	Reset time.Duration
	// Limit is the allowance of a whole window; 0 if not announced.
	Limit int64
	// Window is the length of the policy's window; 0 if not announced.
	Window time.Duration
	// Used is the requests counted so far (GitHub's X-RateLimit-Used); -1
	// if not announced.
	Used int64
	// Policy names the budget: the IETF policy's name or GitHub's
	// X-RateLimit-Resource, empty if none.
	Policy string
	// Source is the header family it was read from: "ietf" (RateLimit and
	// RateLimit-Policy), "draft" (RateLimit-Limit, -Remaining, -Reset, as
	// the older drafts and envoyproxy/ratelimit send them) or "x"
	// (X-RateLimit-*).
	Source string
}

// Exhausted reports whether the budget is spent until Reset.
func (b Budget) Exhausted() bool { return b.Remaining <= 0 && b.Reset > 0 }

// pace is the rate, in requests per second, that spends what remains
// evenly over what is left of the window.
func (b Budget) pace() float64 {
	return float64(b.Remaining) / max(b.Reset.Seconds(), 1e-3)
}

// ParseBudget reads the budget a response's header announces, from the
// IETF RateLimit and RateLimit-Policy fields (draft-ietf-httpapi-
// ratelimit-headers, parsed as RFC 9651 structured fields, as sluice's own
// gateway sends them), the RateLimit-Limit/-Remaining/-Reset fields of the
// older drafts and of envoyproxy/ratelimit, or the X-RateLimit-* fields of
// GitHub and most APIs. X-RateLimit-Reset is read as seconds to wait, Unix
// seconds or Unix milliseconds, by its size; X-RateLimit-Reset-After is
// seconds to wait. When several policies are announced, the most
// restrictive wins: the one whose remaining requests, spread over the time
// to its reset, allow the lowest rate. ok is false when no usable budget
// is announced; malformed fields are ignored, never an error.
func ParseBudget(h http.Header, now time.Time) (b Budget, ok bool) {
	if v := h.Values("Ratelimit"); len(v) > 0 {
		if b, ok = parseIETF(v, h.Values("Ratelimit-Policy")); ok {
			return b, true
		}
	}
	if b, ok = parseTriple(h, "Ratelimit-Limit", "Ratelimit-Remaining", "Ratelimit-Reset", now, false); ok {
		b.Source = "draft"
		return b, true
	}
	if b, ok = parseTriple(h, "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", now, true); ok {
		b.Source = "x"
		b.Policy = strings.TrimSpace(h.Get("X-Ratelimit-Resource"))
		if u, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-Ratelimit-Used")), 10, 64); err == nil && u >= 0 {
			b.Used = u
		}
		return b, true
	}
	return Budget{}, false
}

// parseIETF reads RateLimit (a list of policy names with r and t) and
// RateLimit-Policy (names with q and w) as structured fields; a name
// joins the two. Draft 7's dictionary form, "limit=10, remaining=1,
// reset=7", is read too.
func parseIETF(rl, policy []string) (Budget, bool) {
	if list, err := httpsfv.UnmarshalList(rl); err == nil {
		quotas := map[string][2]int64{}
		readQuotas(quotas, policy)
		best, found := Budget{}, false
		for it := range listItems(list) {
			r, okr := intParam(it.Params, "r")
			t, okt := intParam(it.Params, "t")
			if !okr || !okt || r < 0 || t < 0 {
				continue
			}
			b := Budget{Remaining: r, Reset: seconds(t), Used: -1, Policy: itemName(it), Source: "ietf"}
			if qw, ok := quotas[b.Policy]; ok {
				b.Limit, b.Window = qw[0], seconds(qw[1])
			}
			if !found || tighter(b, best) {
				best, found = b, true
			}
		}
		if found {
			return best, true
		}
	}
	d, err := httpsfv.UnmarshalDictionary(rl)
	if err != nil {
		return Budget{}, false
	}
	r, okr := dictInt(d, "remaining")
	t, okt := dictInt(d, "reset")
	if !okr || !okt || r < 0 || t < 0 {
		return Budget{}, false
	}
	l, _ := dictInt(d, "limit")
	return Budget{Remaining: r, Reset: seconds(t), Limit: max(l, 0), Used: -1, Source: "ietf"}, true
}

// readQuotas reads RateLimit-Policy into quotas: each named policy's
// quota (q) and window (w, 0 when absent); a policy without q is left out.
func readQuotas(quotas map[string][2]int64, policy []string) {
	pl, err := httpsfv.UnmarshalList(policy)
	if err != nil {
		return
	}
	for it := range listItems(pl) {
		if q, ok := intParam(it.Params, "q"); ok {
			w, _ := intParam(it.Params, "w")
			quotas[itemName(it)] = [2]int64{q, w}
		}
	}
}

// listItems yields the items of a structured-field list, passing over
// its inner lists.
func listItems(l httpsfv.List) iter.Seq[httpsfv.Item] {
	return func(yield func(httpsfv.Item) bool) {
		for _, m := range l {
			if it, ok := m.(httpsfv.Item); ok && !yield(it) {
				return
			}
		}
	}
}

func itemName(it httpsfv.Item) string {
	switch v := it.Value.(type) {
	case string:
		return v
	case httpsfv.Token:
		return string(v)
	}
	return ""
}

func intParam(p *httpsfv.Params, k string) (int64, bool) {
	if p == nil {
		return 0, false
	}
	v, ok := p.Get(k)
	if !ok {
		return 0, false
	}
	i, ok := v.(int64)
	return i, ok
}

func dictInt(d *httpsfv.Dictionary, k string) (int64, bool) {
	m, ok := d.Get(k)
	if !ok {
		return 0, false
	}
	it, ok := m.(httpsfv.Item)
	if !ok {
		return 0, false
	}
	i, ok := it.Value.(int64)
	return i, ok
}

// tighter reports whether a allows a lower rate than b.
func tighter(a, b Budget) bool {
	if a.Exhausted() != b.Exhausted() {
		return a.Exhausted()
	}
	if a.Exhausted() {
		return a.Reset > b.Reset
	}
	return a.pace() < b.pace()
}

// parseTriple reads a limit/remaining/reset triple of fields. Remaining
// and a reset are required. With epoch, a reset too large to be a delay is
// read as a Unix time, in seconds or milliseconds.
func parseTriple(h http.Header, limitF, remF, resetF string, now time.Time, epoch bool) (Budget, bool) {
	rv := h.Get(remF)
	if rv == "" {
		return Budget{}, false
	}
	rem, ok := leadingInt(rv)
	if !ok {
		return Budget{}, false
	}
	var reset time.Duration
	if v := h.Get(resetF); v != "" {
		if reset, ok = resetValue(v, now, epoch); !ok {
			return Budget{}, false
		}
	} else if v := h.Get(resetF + "-After"); v != "" { // Discord's X-RateLimit-Reset-After
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f >= 0) {
			return Budget{}, false
		}
		reset = clampReset(time.Duration(math.Ceil(f * float64(time.Second))))
	} else {
		return Budget{}, false
	}
	b := Budget{Remaining: max(rem, 0), Reset: reset, Used: -1}
	if l, ok := leadingInt(h.Get(limitF)); ok && l > 0 {
		b.Limit = l
		b.Window = quotaWindow(h.Get(limitF))
	}
	return b, true
}

// quotaWindow reads the window of the early drafts' quota policy, the w
// of "100, 100;w=60" (as envoyproxy/ratelimit sends it); 0 if none.
func quotaWindow(v string) time.Duration {
	_, params, ok := strings.Cut(v, ";")
	for ok {
		var p string
		p, params, ok = strings.Cut(params, ";")
		if k, val, found := strings.Cut(strings.TrimSpace(p), "="); found && strings.TrimSpace(k) == "w" {
			if n, err := strconv.ParseInt(strings.TrimSpace(strings.SplitN(val, ",", 2)[0]), 10, 64); err == nil && n > 0 {
				return seconds(n)
			}
		}
	}
	return 0
}

// leadingInt reads the integer at the start of v: "100" and the early
// drafts' "100, 100;w=60" both give 100.
func leadingInt(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	end := 0
	for end < len(v) && (v[end] >= '0' && v[end] <= '9' || end == 0 && v[end] == '-') {
		end++
	}
	n, err := strconv.ParseInt(v[:end], 10, 64)
	return n, err == nil
}

// A reset of at least epochSeconds is a Unix time in seconds (1973 on:
// as a delay it would be over three years), and of at least epochMillis a
// Unix time in milliseconds (as seconds it would be the year 5138).
const (
	epochSeconds = 100_000_000
	epochMillis  = 100_000_000_000
)

func resetValue(v string, now time.Time, epoch bool) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0) || math.IsInf(f, 0) {
		return 0, false
	}
	switch {
	case epoch && f >= epochMillis:
		return clampReset(time.UnixMilli(int64(f)).Sub(now)), true
	case epoch && f >= epochSeconds:
		return clampReset(time.Unix(int64(f), 0).Sub(now)), true
	}
	if f > retry.MaxRetryAfter.Seconds() {
		return retry.MaxRetryAfter, true
	}
	return clampReset(time.Duration(math.Ceil(f * float64(time.Second)))), true
}

func seconds(s int64) time.Duration {
	if s > int64(retry.MaxRetryAfter/time.Second) {
		return retry.MaxRetryAfter
	}
	return time.Duration(s) * time.Second
}

func clampReset(d time.Duration) time.Duration {
	return min(max(d, 0), retry.MaxRetryAfter)
}
