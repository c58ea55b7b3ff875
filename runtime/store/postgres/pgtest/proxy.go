package pgtest

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a PostgreSQL server, so that a test
// can make the database unreachable: Down closes the proxy's port and
// every connection through it (clients see their connections reset and
// new ones refused), Up opens the same port again.
type Proxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// Proxied returns a proxy in front of the server of connection string u
// (as URL returns it) and u rewritten to connect through it. The proxy
// is closed when the test ends.
func Proxied(tb testing.TB, u string) (*Proxy, string) {
	tb.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		tb.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{target: pu.Host, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("pgtest: proxy: %v", err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	tb.Cleanup(func() { p.Down(); p.wg.Wait() })
	pu.Host = p.addr
	return p, pu.String()
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.ln != ln { // went down meanwhile
				p.mu.Unlock()
				c.Close()
				s.Close()
				continue
			}
			p.conns[c], p.conns[s] = true, true
			p.mu.Unlock()
			for _, pair := range [][2]net.Conn{{c, s}, {s, c}} {
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					_, _ = io.Copy(pair[0], pair[1])
					pair[0].Close()
					pair[1].Close()
					p.mu.Lock()
					delete(p.conns, pair[0])
					delete(p.conns, pair[1])
					p.mu.Unlock()
				}()
			}
		}
	}()
}

// Down makes the database unreachable through the proxy.
func (p *Proxy) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Up makes it reachable again, on the same address (safe to call from
// any goroutine; a proxy that is up is left as it is).
func (p *Proxy) Up() error {
	p.mu.Lock()
	up := p.ln != nil
	p.mu.Unlock()
	if up {
		return nil
	}
	var err error
	for range 50 { // the port may take a moment to be free again
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(ln)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pgtest: proxy: listen again on %s: %w", p.addr, err)
}
