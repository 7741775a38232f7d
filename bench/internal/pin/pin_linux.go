package pin

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

func bind(pid int, cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	dir := "/proc/self/task"
	if pid != 0 {
		dir = "/proc/" + strconv.Itoa(pid) + "/task"
	}
	// A thread started while the list is read inherits the mask of the
	// thread that starts it; a second pass catches one started from a
	// thread bound only after it was listed.
	for range 2 {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("pin: threads of process %d: %w", pid, err)
		}
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("pin: bind thread %d of process %d to CPUs %s: %w", tid, pid, Format(cpus), err)
			}
		}
	}
	return nil
}

// Current returns the CPUs thread tid (0: the calling thread) may run on.
func Current(tid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
