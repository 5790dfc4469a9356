//go:build linux

package component

import (
	"net"
	"syscall"
)

// quickAcker returns a function that makes the kernel acknowledge what
// arrived on conn at once instead of delaying the ACK. Linux leaves quick
// acknowledgement mode by itself, so it is asked for again after every
// read. Why at all: Prosody writes to the component with Nagle's
// algorithm on, so a stanza it sends while an earlier one is not yet
// acknowledged waits for that ACK; pingd reads the echo of its own
// acknowledgement marker (acks.go) and answers nothing, so its kernel
// delayed the ACK by up to 40 ms, and the next request Prosody forwarded
// (a publish, a subscribe) waited that long. Measured with the latency
// benchmark: an XMPP publish's notification took 24 ms at the median
// instead of 2 ms. nil when conn is not a TCP connection.
func quickAcker(conn net.Conn) func() {
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tcp.SyscallConn()
	if err != nil {
		return nil
	}
	set := func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	}
	return func() { _ = rc.Control(set) }
}
