//go:build !linux

package pin

func bind(pid int, cpus []int) error { return ErrUnsupported }

// Current returns the CPUs thread tid may run on.
func Current(tid int) ([]int, error) { return nil, ErrUnsupported }
