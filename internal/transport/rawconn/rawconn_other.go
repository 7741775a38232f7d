//go:build !linux

package rawconn

import "net"

// Wrap returns nc: reading and writing a socket without the scheduler's
// bookkeeping is done on Linux only.
func Wrap(nc net.Conn) net.Conn { return nc }
