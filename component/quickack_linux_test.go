//go:build linux

package component

import (
	"net"
	"syscall"
	"testing"
)

// TestReadsAskForQuickAcks: after each read on the component's connection
// the socket is back in quick acknowledgement mode, even when the kernel
// had left it (here: switched off by hand, as Linux does on its own once
// a connection looks interactive).
func TestReadsAskForQuickAcks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		for range 3 {
			if _, err := c.Write([]byte("<iq/>")); err != nil {
				return
			}
		}
		// The peer's FIN puts the reader's socket back in delayed
		// acknowledgement mode (Linux's tcp_fin): close only once the
		// test has looked.
		<-done
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rc, err := raw.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	quickAck := func(set int) (got int) {
		err := rc.Control(func(fd uintptr) {
			if set >= 0 {
				if err := syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, set); err != nil {
					t.Fatal(err)
				}
			}
			got, err = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK)
			if err != nil {
				t.Fatal(err)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	plain := &traceConn{Conn: raw}
	traced := &traceConn{Conn: raw, quickAck: quickAcker(raw)}
	buf := make([]byte, 5)
	if quickAck(0); quickAck(-1) != 0 {
		t.Fatal("could not leave quick acknowledgement mode")
	}
	if _, err := plain.Read(buf); err != nil {
		t.Fatal(err)
	}
	if quickAck(-1) != 0 {
		t.Fatal("a read without quickAck changed the mode: the check below proves nothing")
	}
	for range 2 {
		quickAck(0)
		if _, err := traced.Read(buf); err != nil {
			t.Fatal(err)
		}
		if got := quickAck(-1); got != 1 {
			t.Fatalf("after a read: TCP_QUICKACK = %d, want 1", got)
		}
	}
}
