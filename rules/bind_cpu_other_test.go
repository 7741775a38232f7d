//go:build !unix

package rules_test

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
