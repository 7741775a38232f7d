package pin

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	l, err := Split([]int{0, 1}, 1)
	if err != nil || !slices.Equal(l.Self, []int{0}) || len(l.Others) != 1 || !slices.Equal(l.Others[0], []int{1}) {
		t.Fatalf("Split([0 1], 1) = %+v, %v; want self [0], others [[1]]", l, err)
	}
	// A process restricted to some CPUs (taskset) splits those.
	cpus := []int{2, 3, 5, 7}
	l, err = Split(cpus, 2)
	if err != nil || !slices.Equal(l.Self, []int{2, 3}) || !slices.Equal(l.Others[0], []int{7}) || !slices.Equal(l.Others[1], []int{5}) {
		t.Fatalf("Split(%v, 2) = %+v, %v", cpus, l, err)
	}
	l.Self[0] = 99
	if cpus[0] != 2 {
		t.Fatal("Split's Self shares the caller's slice")
	}
	for _, c := range []struct {
		cpus  []int
		roles int
	}{{[]int{0}, 1}, {[]int{0, 1}, 2}, {[]int{0, 1, 2, 3}, 0}, {nil, 1}} {
		if _, err := Split(c.cpus, c.roles); err == nil {
			t.Errorf("Split(%v, %d) did not fail", c.cpus, c.roles)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{{nil, ""}, {[]int{3}, "3"}, {[]int{0, 1, 2}, "0-2"}, {[]int{0, 2, 3, 5}, "0,2-3,5"}} {
		if got := Format(c.in); got != c.want {
			t.Errorf("Format(%v) = %q; want %q", c.in, got, c.want)
		}
	}
}

// allowed reads the CPU list the kernel reports for pid.
func allowed(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no Cpus_allowed_list")
	return ""
}

func TestProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		if err := Process(os.Getpid(), []int{0}); err != ErrUnsupported {
			t.Fatalf("Process = %v; want ErrUnsupported", err)
		}
		return
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := Process(cmd.Process.Pid, []int{0}); err != nil {
		t.Fatal(err)
	}
	if got := allowed(t, cmd.Process.Pid); got != "0" {
		t.Fatalf("child's CPUs after Process(pid, [0]) = %q; want 0", got)
	}
	if err := Process(cmd.Process.Pid, nil); err == nil {
		t.Fatal("Process with no CPUs did not fail")
	}
	if err := Process(1<<30, []int{0}); err == nil {
		t.Fatal("Process of a process that does not exist did not fail")
	}
}

func TestSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("affinity is Linux's")
	}
	before, err := Current(0)
	if err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	defer func() {
		if err := Self(before); err != nil {
			t.Error(err)
		}
		runtime.GOMAXPROCS(procs)
	}()
	if err := Self(before[:1]); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS after Self of one CPU = %d", got)
	}
	if got, want := allowed(t, os.Getpid()), strconv.Itoa(before[0]); got != want {
		t.Fatalf("this process's CPUs = %q; want %q", got, want)
	}
	// A thread started after binding inherits the binding.
	done := make(chan []int)
	go func() {
		runtime.LockOSThread()
		c, _ := Current(0)
		done <- c
	}()
	if c := <-done; !slices.Equal(c, before[:1]) {
		t.Fatalf("a new thread's CPUs = %v; want %v", c, before[:1])
	}
}
