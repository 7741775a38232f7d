package nginxtest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel kill nginx when the test process dies.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
