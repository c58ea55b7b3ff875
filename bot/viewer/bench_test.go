package viewer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/gin-gonic/gin"
)

// longSession appends a session of about n events: rounds of a model call
// and a tool call by the worker.
func longSession(tb testing.TB, s store.Store, sid string, n int) {
	tb.Helper()
	run := "run-" + sid
	ds := []event.Draft{
		{RunID: run, Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "a long session"}},
		{RunID: run, Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": run, "prompt": "a long session", "trigger": map[string]any{"repo": "octo/app"}}},
	}
	appendTo(tb, s, sid, ds...)
	for i := 0; len(ds) < n; i++ {
		var batch []event.Draft
		for j := 0; j < 50 && len(ds)+len(batch) < n; j++ {
			k := i*50 + j
			batch = append(batch,
				event.Draft{RunID: run, Type: event.LLMRequest, Actor: "worker", Payload: map[string]any{"attempt": 1, "role": "worker", "request": map[string]any{"model": "m", "schema_version": "v1", "messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("step %d", k)}}}}},
				event.Draft{RunID: run, Type: event.LLMResponse, Actor: "worker", Payload: map[string]any{"role": "worker", "response": map[string]any{"model": "m", "finish_reason": "tool_use", "schema_version": "v1", "text": "", "tool_calls": []any{}, "usage": map[string]any{"input_tokens": 1000, "output_tokens": 20, "cost_usd": 0.003}}}},
				event.Draft{RunID: run, Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"args": map[string]any{"path": "a.go"}, "call_id": fmt.Sprintf("c%d", k), "caller": "worker", "tool": "repo.read"}},
				event.Draft{RunID: run, Type: event.ToolResult, Actor: "kernel", Payload: map[string]any{"call_id": fmt.Sprintf("c%d", k), "ok": true, "tool": "repo.read", "duration_ms": 1.5, "result": map[string]any{"content": "package a\n"}}},
			)
		}
		appendTo(tb, s, sid, batch...)
		ds = append(ds, batch...)
	}
}

// BenchmarkRunPage5000 measures the run page of a 5,000-event session:
// "replay" (the baseline: folding the log into its snapshot, which every
// read does) against "page" (building the page model and rendering the
// HTML, the latest DefaultMaxRows events listed), "page-all-rows" (?all=1)
// and "http" (the whole GET /runs/:id through gin with the access check,
// to the last byte). Report each as a ratio to replay.
func BenchmarkRunPage5000(b *testing.B) {
	st := store.NewMemory(newSealer(b))
	longSession(b, st, "long", 5000)
	evs, err := st.Read(context.Background(), "long", 1)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			if _, err := replay.Replay(evs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("page", func(b *testing.B) {
		var out []byte
		for b.Loop() {
			s, err := BuildRows("long", evs, time.Now(), DefaultMaxRows)
			if err != nil {
				b.Fatal(err)
			}
			out = runPage(page{Title: "x", S: s, Live: true})
		}
		b.ReportMetric(float64(len(out)), "html-bytes")
	})
	b.Run("page-all-rows", func(b *testing.B) {
		var out []byte
		for b.Loop() {
			s, err := Build("long", evs, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			out = runPage(page{Title: "x", S: s, Live: true})
		}
		b.ReportMetric(float64(len(out)), "html-bytes")
	})
	ck, _ := access.New(access.Options{Token: opToken})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, _ := api.New(api.Options{Store: st, Access: ck, Logger: quiet})
	v, err := New(Options{Store: st, Access: ck, Lister: a, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	v.Register(e)
	b.Run("http", func(b *testing.B) {
		for b.Loop() {
			req := httptest.NewRequest(http.MethodGet, "/runs/long", nil)
			req.Header.Set("Authorization", "Bearer "+opToken)
			w := httptest.NewRecorder()
			e.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				b.Fatalf("GET: %d", w.Code)
			}
		}
	})
}
