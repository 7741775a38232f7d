//go:build !linux

package nginxtest

import "os/exec"

func setDeathSignal(cmd *exec.Cmd) {}
