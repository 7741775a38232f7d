package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes cmd's process get SIGKILL when this one ends, so that
// an interrupted run leaves no proxy behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
