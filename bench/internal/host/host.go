// Package host says what a benchmark's figures need to be read with:
// how busy the machine was.
package host

import (
	"os"
	"strings"
)

// LoadAvg returns /proc/loadavg's three averages, "unknown" where there
// is none.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
