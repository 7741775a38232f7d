//go:build !unix

package gateway

import "math"

// fileLimit returns a large number: there is no open-file limit to read.
func fileLimit() int { return math.MaxInt32 }
