package postgres

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Listener holds one dedicated connection that LISTENs on a set of
// channels and hands each notification's payload to the channel's
// handler. A lost connection is re-established with backoff; since
// notifications sent meanwhile are lost, every handler's resync function
// runs after each (re)connect, and callers keep a polling fallback, so a
// lost notification only delays work.
type Listener struct {
	cfg *pgx.ConnConfig
	log *slog.Logger

	mu       sync.Mutex
	handlers map[string][]handler
	started  bool
	cancel   context.CancelFunc
	done     chan struct{}
	// connected is closed at the first successful LISTEN.
	connected     chan struct{}
	everConnected bool
}

type handler struct {
	on     func(payload string)
	resync func()
}

// NewListener returns a listener on the pool's database. Register
// handlers with Handle, then Start it.
func NewListener(pool *pgxpool.Pool, log *slog.Logger) *Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Listener{cfg: pool.Config().ConnConfig.Copy(), log: log, handlers: map[string][]handler{}, connected: make(chan struct{})}
}

// Handle registers on for notifications on channel, and resync for every
// (re)connect. Channels must be plain identifiers. Handle after Start
// takes effect at the next reconnect.
func (l *Listener) Handle(channel string, on func(payload string), resync func()) {
	l.mu.Lock()
	l.handlers[channel] = append(l.handlers[channel], handler{on: on, resync: resync})
	l.mu.Unlock()
}

// Start begins listening in the background until Close.
func (l *Listener) Start() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return
	}
	l.started = true
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		l.loop(ctx)
	}()
}

// Connected returns a channel closed once the listener first listens.
func (l *Listener) Connected() <-chan struct{} { return l.connected }

// Close stops listening.
func (l *Listener) Close() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (l *Listener) loop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("postgres: LISTEN connection lost; polling covers the gap", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// session connects, LISTENs and dispatches until the connection fails.
func (l *Listener) session(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	l.mu.Lock()
	hs := make(map[string][]handler, len(l.handlers))
	for ch, h := range l.handlers {
		hs[ch] = append([]handler(nil), h...)
	}
	l.mu.Unlock()
	for ch := range hs {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	for _, list := range hs {
		for _, h := range list {
			if h.resync != nil {
				h.resync()
			}
		}
	}
	l.mu.Lock()
	if !l.everConnected {
		l.everConnected = true
		close(l.connected)
	}
	l.mu.Unlock()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		for _, h := range hs[n.Channel] {
			h.on(n.Payload)
		}
	}
}
