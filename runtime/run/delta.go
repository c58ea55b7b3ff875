package run

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/runtime/event"
)

// Coalescing of streamed text into output.delta events: one
// event per deltaEvery or deltaBytes of text, whichever comes first, so
// that a long answer streamed token by token does not explode the log.
const (
	deltaEvery = 100 * time.Millisecond
	deltaBytes = 512
)

// deltaWriter appends a model call's streamed text as output.delta events
// whose parent is the llm.request. SSE subscribers and the viewer see
// them as they are appended; replay and re-execution skip them, since
// llm.response carries the whole text.
type deltaWriter struct {
	ctx    context.Context
	j      eventLog
	role   string
	parent string
	every  time.Duration
	max    int

	mu    sync.Mutex
	buf   strings.Builder
	timer *time.Timer
	err   error
}

func newDeltaWriter(ctx context.Context, j eventLog, role, parent string) *deltaWriter {
	return &deltaWriter{ctx: context.WithoutCancel(ctx), j: j, role: role, parent: parent, every: deltaEvery, max: deltaBytes}
}

// add takes one piece of streamed text.
func (w *deltaWriter) add(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.WriteString(s)
	if w.buf.Len() >= w.max {
		w.flushLocked()
		return
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(w.every, w.flush)
	}
}

func (w *deltaWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
}

func (w *deltaWriter) flushLocked() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.buf.Len() == 0 {
		return
	}
	text := w.buf.String()
	w.buf.Reset()
	if _, err := w.j.Append(w.ctx, event.OutputDelta, w.role, map[string]any{"text": text, "role": w.role}, w.parent); err != nil && w.err == nil {
		w.err = err
	}
}

// close writes what is left and returns the first append error.
func (w *deltaWriter) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flushLocked()
	return w.err
}
