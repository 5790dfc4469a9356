package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards TCP connections to a target and can cut them, so a test
// decides when a client may (re)connect — for example to be sure a
// subscriber is online before pingd's component reconnects.
type Proxy struct {
	Addr   string
	target string
	ln     net.Listener

	mu      sync.Mutex
	blocked bool
	conns   map[net.Conn]bool
	// swallowing drops what clients send instead of forwarding it.
	swallowing atomic.Bool
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.Block() })
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		blocked := p.blocked
		p.mu.Unlock()
		if blocked {
			c.Close()
			continue
		}
		go p.forward(c)
	}
}

func (p *Proxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.blocked {
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(p.upstream(up), c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// upstream writes to the target unless the proxy swallows.
func (p *Proxy) upstream(up net.Conn) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		if p.swallowing.Load() {
			return len(b), nil
		}
		return up.Write(b)
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// Swallow makes the open and new connections drop what the clients send
// from now on, as a server does that dies with their bytes unread, while
// the target's side still reaches them. Block and Allow end it.
func (p *Proxy) Swallow() { p.swallowing.Store(true) }

// Block cuts every open connection and refuses new ones until Allow.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for c := range p.conns {
		c.Close()
	}
	p.swallowing.Store(false) // the connections that swallowed are cut
}

// Allow lets connections through again.
func (p *Proxy) Allow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
}
