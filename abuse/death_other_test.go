//go:build !linux

package abuse

import "os/exec"

// setDeathSignal does nothing outside Linux: the processes are stopped by
// each test's cleanup.
func setDeathSignal(cmd *exec.Cmd) {}
