package queue

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Durable is what a Spool feeds: LogQueue and PGQueue.
type Durable interface {
	Queue
	Releaser
	Notifier
	Lister
	Get(ctx context.Context, id string) (Record, bool, error)
	Prune(ctx context.Context, before time.Time) (int64, error)
	// OldestClaim is how long the oldest claimed, unfinished delivery has
	// been claimed; 0 when none is.
	OldestClaim(ctx context.Context) (time.Duration, error)
	Close() error
}

// Defaults of a Spool.
const (
	DefaultSpoolMax   = 64 << 20
	DefaultSpoolRetry = time.Second
)

// ErrSpoolFull is returned by a Spool's Enqueue when the queue cannot take
// the delivery and the spool file has no room left for it.
var ErrSpoolFull = errors.New("queue: spool full")

// SpoolOptions tune a Spool.
type SpoolOptions struct {
	Max    int64         // bytes of the spool file; default DefaultSpoolMax
	Retry  time.Duration // how often spooled deliveries are offered to the queue; default DefaultSpoolRetry
	Logger *slog.Logger  // nil discards
}

// Spool is a Durable queue with a local fallback: a delivery the queue
// cannot store (its database is down) is appended to a small file in the
// data directory and fdatasynced, and Enqueue succeeds, so the webhook
// handler still answers 202 and GitHub, which does not retry, loses
// nothing. A goroutine offers the spooled deliveries to the queue every
// Retry until it takes them (a delivery it already holds is a duplicate
// and dropped), then empties the file. While deliveries wait in the spool,
// new ones go straight to it, in order and without waiting on the
// database each time. A delivery whose ID, or payload key, is spooled is
// a duplicate. The file is bounded (Max); a full spool fails Enqueue
// (ErrSpoolFull: the handler answers 503 and the reconciler or a
// maintainer redelivers). Opening the spool replays what an earlier
// process left in it (a torn last record, never acknowledged, is cut).
//
// Everything else (Claim, Done, listing) is the queue's.
type Spool struct {
	Durable
	path  string
	max   int64
	retry time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	f       *os.File
	size    int64
	pending []Delivery // spooled, oldest first
	ids     map[string]bool
	keys    map[string]bool
	failed  error // a failed write: the file's state is unknown
	closed  bool

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// OpenSpool opens (creating if needed) the spool file at path in front of
// q and starts offering what it holds to q.
func OpenSpool(path string, q Durable, o SpoolOptions) (*Spool, error) {
	if o.Max <= 0 {
		o.Max = DefaultSpoolMax
	}
	if o.Retry <= 0 {
		o.Retry = DefaultSpoolRetry
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("queue: spool: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("queue: spool: %w", err)
	}
	s := &Spool{Durable: q, path: path, max: o.Max, retry: o.Retry, log: o.Logger, f: f,
		ids: map[string]bool{}, keys: map[string]bool{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if err := s.load(); err != nil {
		f.Close()
		return nil, fmt.Errorf("queue: spool %s: %w", path, err)
	}
	if len(s.pending) > 0 {
		s.log.Warn("queue: deliveries left in the spool by an earlier process: offering them to the queue", "spooled", len(s.pending))
	}
	go s.loop()
	return s, nil
}

// load reads the spooled deliveries and cuts a torn tail.
func (s *Spool) load() error {
	r := bufio.NewReader(s.f)
	var end int64
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			return err
		}
		n := binary.LittleEndian.Uint32(hdr[:4])
		if n == 0 || int64(n) > s.max {
			break
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			return err
		}
		if crc32.Checksum(p, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			break
		}
		d := decoder{b: p}
		dl := Delivery{ID: d.str(), Event: d.str(), Action: d.str(), Key: d.str(), ReceivedAt: time.Unix(0, d.varint())}
		if d.err != nil {
			return fmt.Errorf("record at offset %d: %w", end, d.err)
		}
		dl.Body = d.b
		end += 8 + int64(n)
		if !s.ids[dl.ID] {
			s.remember(dl)
		}
	}
	if err := s.f.Truncate(end); err != nil {
		return err
	}
	s.size = end
	if _, err := s.f.Seek(end, io.SeekStart); err != nil {
		return err
	}
	return s.f.Sync()
}

func (s *Spool) remember(d Delivery) {
	s.pending = append(s.pending, d)
	s.ids[d.ID] = true
	if d.Key != "" {
		s.keys[d.Key] = true
	}
}

// Enqueue implements Queue: into the queue, or into the spool when the
// queue fails (other than for a closed queue or an ended request).
func (s *Spool) Enqueue(ctx context.Context, d Delivery) (bool, error) {
	s.mu.Lock()
	waiting := len(s.pending) > 0
	s.mu.Unlock()
	if !waiting {
		dup, err := s.Durable.Enqueue(ctx, d)
		if err == nil || errors.Is(err, ErrQueueClosed) || ctx.Err() != nil {
			return dup, err
		}
		s.log.Warn("queue: the queue could not store a delivery: spooling it on local disk", "delivery", d.ID, "err", err)
	}
	return s.append(d)
}

// append spools d.
func (s *Spool) append(d Delivery) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return false, ErrQueueClosed
	case s.failed != nil:
		return false, s.failed
	case s.ids[d.ID], d.Key != "" && s.keys[d.Key]:
		return true, nil
	}
	var p []byte
	for _, f := range []string{d.ID, d.Event, d.Action, d.Key} {
		p = binary.AppendUvarint(p, uint64(len(f)))
		p = append(p, f...)
	}
	at := d.ReceivedAt
	if at.IsZero() {
		at = time.Now()
	}
	p = binary.AppendVarint(p, at.UnixNano())
	p = append(p, d.Body...)
	rec := make([]byte, 8, 8+len(p))
	binary.LittleEndian.PutUint32(rec[:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(p, castagnoli))
	rec = append(rec, p...)
	if s.size+int64(len(rec)) > s.max {
		return false, fmt.Errorf("%w: %d deliveries (%d bytes) wait for the queue", ErrSpoolFull, len(s.pending), s.size)
	}
	if _, err := s.f.WriteAt(rec, s.size); err != nil {
		s.failed = fmt.Errorf("queue: spool write: %w", err)
		return false, s.failed
	}
	if err := fdatasync(s.f); err != nil {
		s.failed = fmt.Errorf("queue: spool sync: %w", err)
		return false, s.failed
	}
	s.size += int64(len(rec))
	d.Body = append([]byte(nil), d.Body...) // the handler reuses its buffer
	d.ReceivedAt = at
	s.remember(d)
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return false, nil
}

// Spooled is the number of deliveries waiting in the spool.
func (s *Spool) Spooled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Depth implements Queue: the queue's open deliveries and the spooled
// ones (those alone if the queue cannot answer).
func (s *Spool) Depth(ctx context.Context) (int, error) {
	n, err := s.Durable.Depth(ctx)
	return n + s.Spooled(), err
}

// Beat passes progress on to the queue (Beater).
func (s *Spool) Beat(id string) {
	if b, ok := s.Durable.(Beater); ok {
		b.Beat(id)
	}
}

// Withdraw passes a withdrawal on to the queue (Withdrawer). Deliveries
// still in the spool are not looked at: they reach the queue in arrival
// order, before any cancel that came after them.
func (s *Spool) Withdraw(ctx context.Context, before string, match func(Delivery) bool, reason string) ([]Withdrawal, error) {
	w, ok := s.Durable.(Withdrawer)
	if !ok {
		return nil, errors.New("queue: spool: the queue cannot withdraw deliveries")
	}
	return w.Withdraw(ctx, before, match, reason)
}

func (s *Spool) loop() {
	defer close(s.done)
	t := time.NewTicker(s.retry)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.replay()
	}
}

// replay offers the spooled deliveries to the queue, oldest first, until
// one fails; once all are in, the file is emptied.
func (s *Spool) replay() {
	s.mu.Lock()
	batch := append([]Delivery(nil), s.pending...)
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	moved := 0
	for _, d := range batch {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.Durable.Enqueue(ctx, d)
		cancel()
		if err != nil {
			s.log.Debug("queue: the queue does not take the spooled deliveries yet", "spooled", len(batch)-moved, "err", err)
			break
		}
		moved++
	}
	if moved == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.pending[:moved] {
		delete(s.ids, d.ID)
		if d.Key != "" {
			delete(s.keys, d.Key)
		}
	}
	s.pending = append([]Delivery(nil), s.pending[moved:]...)
	s.log.Info("queue: spooled deliveries handed to the queue", "moved", moved, "left", len(s.pending))
	if len(s.pending) > 0 || s.failed != nil {
		// Those handed over stay in the file until the rest follow; a
		// restart offers them again and the queue answers duplicate.
		return
	}
	if err := s.f.Truncate(0); err == nil {
		err = s.f.Sync()
		if err == nil {
			s.size = 0
			return
		}
		s.failed = fmt.Errorf("queue: spool sync: %w", err)
	} else {
		s.failed = fmt.Errorf("queue: spool truncate: %w", err)
	}
}

// Close stops offering spooled deliveries (they stay in the file for the
// next process) and closes the queue.
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.done
	return errors.Join(s.f.Close(), s.Durable.Close())
}
