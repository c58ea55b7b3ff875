package sqlite

import (
	"context"
	"database/sql"
	"sync"

	"github.com/agentos/agentos/runtime/store"
)

// Readers run on a pool of their own: a fixed number of connections, each
// with its statements prepared on it once. A read takes exactly one
// connection and everything it does (BEGIN, statement preparation,
// queries, ROLLBACK) runs on that connection, so a read never waits for a
// second one while holding the first, and the pool cannot wait on itself
// however many reads arrive together.
//
// It replaces a database/sql transaction with statements prepared on the
// *sql.DB: preparing one there takes a pooled connection of its own, so a
// read holding its transaction's connection waited for a second one, and
// 64 concurrent first reads (every statement prepared for the first time)
// with an 8-connection pool deadlocked with every connection held by a
// reader waiting for another (TestConcurrentFirstReads).

// readerConns is how many connections readers share. SQLite in WAL mode
// lets them all read at once; more than the cores gains nothing.
const readerConns = 8

type readerPool struct {
	db *sql.DB
	// slots holds readerConns entries: an open connection, or nil for one
	// not opened yet (or closed after an error). Taking an entry is the
	// right to use a connection.
	slots chan *readConn

	mu     sync.Mutex
	closed bool
}

// readConn is one reader connection with the statements prepared on it.
type readConn struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
}

func newReaderPool(db *sql.DB, n int) *readerPool {
	p := &readerPool{db: db, slots: make(chan *readConn, n)}
	for i := 0; i < n; i++ {
		p.slots <- nil
	}
	return p
}

// acquire waits for a slot and returns its connection, opening it if
// needed.
func (p *readerPool) acquire(ctx context.Context) (*readConn, error) {
	var rc *readConn
	select {
	case rc = <-p.slots:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.release(rc, false)
		return nil, store.ErrClosed
	}
	if rc != nil {
		return rc, nil
	}
	conn, err := p.db.Conn(ctx)
	if err != nil {
		p.slots <- nil
		return nil, err
	}
	return &readConn{conn: conn, stmts: map[string]*sql.Stmt{}}, nil
}

// release gives the slot back; a connection in an unknown state (ok
// false) or returned after close is closed, and its slot reopens later.
func (p *readerPool) release(rc *readConn, ok bool) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if rc != nil && (!ok || closed) {
		rc.close()
		rc = nil
	}
	p.slots <- rc
}

// close closes the idle connections; busy ones are closed as their reads
// release them.
func (p *readerPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	// Drained slots go back empty, so that a late acquire finds one and
	// returns ErrClosed instead of waiting.
	n := 0
	for drained := false; !drained; {
		select {
		case rc := <-p.slots:
			if rc != nil {
				rc.close()
			}
			n++
		default:
			drained = true
		}
	}
	for ; n > 0; n-- {
		p.slots <- nil
	}
}

func (rc *readConn) close() {
	for _, st := range rc.stmts {
		st.Close()
	}
	rc.conn.Close()
}

// stmt returns the statement prepared on this connection.
func (rc *readConn) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := rc.stmts[query]; ok {
		return st, nil
	}
	st, err := rc.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	rc.stmts[query] = st
	return st, nil
}
