//go:build !unix

package core

func cpuTime() int64 { return 0 }
