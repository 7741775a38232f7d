package abuse

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill the process when the test process
// dies, so a crashed test leaves no sluice behind.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
