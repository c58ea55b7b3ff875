package webhook

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
)

// cutProxy forwards TCP to PostgreSQL until cut: then every connection
// through it is closed and new ones are refused, until restored.
type cutProxy struct {
	target, addr string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
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
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close(); c.Close() }()
			go func() { _, _ = io.Copy(c, s); s.Close(); c.Close() }()
		}
	}()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.serve(ln)
}

// TestIntakeWhilePostgresIsDown: with PostgreSQL unreachable, signed
// deliveries are still answered 202 (the spool keeps them on local disk)
// and a second copy of one is a duplicate; once PostgreSQL is back, every
// one of them is in the PostgreSQL queue, once.
func TestIntakeWhilePostgresIsDown(t *testing.T) {
	direct := pgtest.Schema(t, pgtest.URL(t))
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startCutProxy(t, u.Host)
	u.Host = proxy.addr
	pq := openPGQueueAt(t, u.String(), queue.PGQueueOptions{})
	sp, err := queue.OpenSpool(filepath.Join(t.TempDir(), "webhooks.spool"), pq, queue.SpoolOptions{Retry: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	e := newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, sp, nil))

	proxy.cut()
	body := exampleOf(t, "issue_comment", "created", 0)
	for i := range 3 {
		// Each a distinct comment: the payload key is the comment's id.
		b := mutate(t, body, func(m map[string]any) { obj(m, "comment")["id"] = float64(9000 + i) })
		if w := post(t, e, signed("issue_comment", fmt.Sprint("down-", i), b)); w.Code != http.StatusAccepted {
			t.Fatalf("delivery %d with PostgreSQL down: %d %s, want 202", i, w.Code, w.Body)
		}
	}
	if w := post(t, e, signed("issue_comment", "down-0", mutate(t, body, func(m map[string]any) { obj(m, "comment")["id"] = float64(9000) }))); w.Code != http.StatusOK {
		t.Fatalf("the same delivery again: %d %s, want 200 duplicate", w.Code, w.Body)
	}
	if n := sp.Spooled(); n != 3 {
		t.Fatalf("%d spooled, want 3", n)
	}
	proxy.restore(t)
	deadline := time.Now().Add(30 * time.Second)
	for sp.Spooled() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries still spooled 30 s after PostgreSQL came back", sp.Spooled())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := context.Background()
	for i := range 3 {
		rec, ok, err := pq.Get(ctx, fmt.Sprint("down-", i))
		if err != nil || !ok || rec.State != "pending" || rec.Event != "issue_comment" {
			t.Errorf("down-%d in PostgreSQL: %+v %v %v", i, noBody(rec), ok, err)
		}
	}
	if n, err := pq.Depth(ctx); err != nil || n != 3 {
		t.Errorf("PostgreSQL queue depth %d %v, want 3", n, err)
	}
}
