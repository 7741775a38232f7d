//go:build !linux

package redistest

import "os/exec"

func setDeathSignal(cmd *exec.Cmd) {}
