package didyoumean

import "strings"

// Closest returns the name in known (searched in order) within an edit
// distance of 2 of name, ignoring case and underscores, or "" if none is.
func Closest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := distance(squash(name), squash(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func squash(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "")) }

// distance is the Levenshtein distance of a and b, capped at 64 for long
// inputs (a hostile config must not cost quadratic time).
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
