//go:build race

package rawconn

import "syscall"

// Under the race detector, the socket's reads and writes go through
// syscall.Read and Write, whose annotations tell the detector that what
// was written before a write happened before what a read of it does:
// without them, a test's client and the server it talks to over a socket
// would race in the detector's eyes.

func sysRead(fd uintptr, p []byte) (int, syscall.Errno) { return errnoOf(syscall.Read(int(fd), p)) }

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) { return errnoOf(syscall.Write(int(fd), p)) }

func errnoOf(n int, err error) (int, syscall.Errno) {
	if err != nil {
		return 0, err.(syscall.Errno)
	}
	return n, 0
}
