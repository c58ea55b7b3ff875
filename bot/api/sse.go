package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/gin-gonic/gin"
)

// events streams a session's events as Server-Sent Events:
//
//	id: <seq>
//	event: <type>
//	data: <the event's canonical JSON line>
//
// A client resumes after Last-Event-ID (the header a browser's EventSource
// sends on reconnect, or ?after=N) and gets every later event exactly once.
// Comment lines keep idle connections alive. The stream ends after the
// session's session.close when nothing follows it (every run's end —
// completed, failed, denied or cancelled — appends turn.terminal and then
// session.close; a paused run ends with run.paused and the stream stays
// open for the answer and the resumed run) and the run that wrote it has
// returned. Resuming after that last session.close answers 204, which
// tells EventSource not to reconnect.
func (a *API) events(c *gin.Context) {
	sid := c.Param("id")
	p, ok := a.identify(c)
	if !ok {
		return
	}
	if !ValidSessionID(sid) {
		Abort(c, http.StatusNotFound, "unknown_session", "no session "+sid)
		return
	}
	after, err := lastEventID(c)
	if err != nil {
		Abort(c, http.StatusBadRequest, "bad_last_event_id", err.Error())
		return
	}
	ctx := c.Request.Context()
	// The whole session is read: its first run names the repository the
	// reader's permission is checked on.
	evs, err := a.o.Store.Read(ctx, sid, 1)
	if err != nil {
		a.internal(c, "read session", err)
		return
	}
	if !a.mayRead(c, p, evs) {
		Abort(c, http.StatusNotFound, "unknown_session", "no session "+sid)
		return
	}
	if after > 1 {
		if after-1 < int64(len(evs)) {
			evs = evs[after-1:]
		} else {
			evs = nil
		}
	}
	if len(evs) == 0 && !a.runs.active(sid) {
		if after == 0 {
			Abort(c, http.StatusNotFound, "unknown_session", "no session "+sid)
		} else {
			Abort(c, http.StatusBadRequest, "bad_last_event_id", fmt.Sprintf("session %s has no event %d", sid, after))
		}
		return
	}
	if after > 0 && len(evs) > 0 && evs[0].Seq != after {
		Abort(c, http.StatusBadRequest, "bad_last_event_id", fmt.Sprintf("session %s has no event %d", sid, after))
		return
	}
	// endWait, when set, is the end of the run that wrote the session.close
	// at endSeq: the stream ends then unless more follows.
	var endWait <-chan struct{}
	var endSeq int64
	if after > 0 && len(evs) == 1 && evs[0].Type == event.SessionClose {
		done, busy := a.runs.done(sid)
		if !busy {
			c.Status(http.StatusNoContent) // the client has seen the end
			return
		}
		endWait, endSeq = done, after
	}

	if !a.openStream() {
		Abort(c, http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
		return
	}
	defer a.streamsWG.Done()
	a.metrics.streams.Inc()
	a.openStreams.Add(1)
	defer func() {
		a.openStreams.Add(-1)
		a.metrics.streams.Dec()
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopAfter := context.AfterFunc(a.streamsCtx, cancel)
	defer stopAfter()

	w := c.Writer
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The server's WriteTimeout protects ordinary handlers; a stream
	// extends its deadline before each write instead.
	extend := func() { _ = rc.SetWriteDeadline(time.Now().Add(2*a.o.KeepAlive + 10*time.Second)) }
	extend()
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", 2000); err != nil {
		return
	}
	w.Flush()

	// Follow runs in its own goroutine so that the writer can interleave
	// keep-alives; it ends when ctx is cancelled (deferred above).
	ch := make(chan event.Event)
	followDone := make(chan error, 1)
	go func() {
		followDone <- store.Follow(ctx, a.watch, sid, after, func(e event.Event) (bool, error) {
			select {
			case ch <- e:
				return false, nil
			case <-ctx.Done():
				return true, ctx.Err()
			}
		})
	}()
	defer func() {
		cancel()
		<-followDone
	}()

	tick := time.NewTicker(a.o.KeepAlive)
	defer tick.Stop()
	var buf []byte
	for {
		select {
		case e := <-ch:
			buf = buf[:0]
			buf = fmt.Appendf(buf, "id: %d\nevent: %s\ndata: ", e.Seq, e.Type)
			buf = e.AppendLine(buf)
			buf = append(buf, '\n', '\n')
			extend()
			if _, err := w.Write(buf); err != nil {
				return
			}
			w.Flush()
			endWait = nil
			if e.Type == event.SessionClose {
				// The run that wrote it may still be returning; its end
				// decides.
				done, busy := a.runs.done(sid)
				if !busy && a.nothingAfter(ctx, sid, e.Seq) {
					return
				}
				endWait, endSeq = done, e.Seq
			}
		case <-endWait:
			endWait = nil
			if !a.runs.active(sid) && a.nothingAfter(ctx, sid, endSeq) {
				return
			}
		case <-tick.C:
			extend()
			if _, err := w.Write([]byte(": keep-alive\n\n")); err != nil {
				return
			}
			w.Flush()
		case err := <-followDone:
			followDone <- err // for the deferred receive
			if err != nil && ctx.Err() == nil {
				a.log.Error("api: following session", "session", sid, "error", err)
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

// nothingAfter reports whether the session has no event after seq.
func (a *API) nothingAfter(ctx context.Context, sid string, seq int64) bool {
	more, err := a.o.Store.Read(ctx, sid, seq+1)
	return err == nil && len(more) == 0
}

// openStream counts a new stream unless the streams have been ended.
func (a *API) openStream() bool {
	a.streamsOpen.Lock()
	defer a.streamsOpen.Unlock()
	if a.streamsCtx.Err() != nil {
		return false
	}
	a.streamsWG.Add(1)
	return true
}

// lastEventID is the seq to resume after: the Last-Event-ID header, else
// ?after=, else 0.
func lastEventID(c *gin.Context) (int64, error) {
	v := strings.TrimSpace(c.GetHeader("Last-Event-ID"))
	name := "Last-Event-ID"
	if v == "" {
		v, name = c.Query("after"), "after"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New(name + " must be an event id (a non-negative integer), not " + strconv.Quote(v))
	}
	return n, nil
}

// pollingStore wakes Watch callers every `every` as well as on the store's
// own notifications, which cover only appends made through this process's
// Store value.
type pollingStore struct {
	store.Store
	every time.Duration
}

func (p pollingStore) Watch(sessionID string) (<-chan struct{}, func()) {
	inner, stop := p.Store.Watch(sessionID)
	out := make(chan struct{}, 1)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-inner:
			case <-t.C:
			case <-quit:
				return
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			stop()
			close(quit)
			<-done
		})
	}
}
