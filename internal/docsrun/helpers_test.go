package docsrun

import (
	"os/exec"
	"strconv"
)

func goCommand(dir string, args ...string) *exec.Cmd {
	c := exec.Command("go", args...)
	c.Dir = dir
	return c
}

func itoa(n int) string { return strconv.Itoa(n) }
