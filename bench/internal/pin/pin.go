package pin

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// ErrUnsupported is returned where CPU affinity is not available.
var ErrUnsupported = errors.New("pin: CPU affinity is not supported on this system")

// Layout is a split of the machine's CPUs between the load generator (this
// process) and the processes it measures.
type Layout struct {
	Self   []int   // this process: the load generator
	Others [][]int // one set per measured role, in the order asked for
}

// Split gives each of roles measured processes one CPU of its own, taken
// from the top of cpus (the CPUs this process may use: Current(0)), and
// this process the CPUs left. It fails when fewer than roles+1 CPUs are
// given.
func Split(cpus []int, roles int) (Layout, error) {
	n := len(cpus)
	if roles < 1 || n < roles+1 {
		return Layout{}, fmt.Errorf("pin: %d CPUs cannot give %d processes a CPU each and keep one for the load generator", n, roles)
	}
	l := Layout{Self: slices.Clone(cpus[:n-roles])}
	for r := range roles {
		l.Others = append(l.Others, []int{cpus[n-1-r]})
	}
	return l, nil
}

// Self binds every thread of this process to cpus and sets GOMAXPROCS to
// their number (which the runtime would otherwise keep at the count it
// read at start).
func Self(cpus []int) error {
	if err := Process(0, cpus); err != nil {
		return err
	}
	runtime.GOMAXPROCS(len(cpus))
	return nil
}

// Process binds every thread of process pid (0: this process) to cpus.
func Process(pid int, cpus []int) error {
	if len(cpus) == 0 {
		return errors.New("pin: no CPUs")
	}
	return bind(pid, cpus)
}

// Format returns cpus as a CPU list ("0-2,5").
func Format(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}
