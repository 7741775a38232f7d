//go:build !unix

package httplimit_test

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
