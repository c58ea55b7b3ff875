package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

var (
	benchOnce sync.Once
	benchLog  []byte
	benchN    int
)

// benchJSONL builds a 100k-event session shaped like a long worker loop:
// model calls with usage, tool calls with results, transitions.
func benchJSONL(b *testing.B) ([]byte, int) {
	benchOnce.Do(func() {
		sealer, err := event.NewSealer(schemas.MustDefault(), nil, time.Now)
		if err != nil {
			b.Fatal(err)
		}
		s := store.NewMemory(sealer)
		ctx := context.Background()
		var seq int64
		app := func(ds ...event.Draft) []event.Event {
			evs, err := s.Append(ctx, "bench", seq, ds...)
			if err != nil {
				b.Fatal(err)
			}
			seq = evs[len(evs)-1].Seq
			return evs
		}
		app(event.Draft{RunID: "r1", Type: "session.start", Actor: "user", Payload: map[string]any{"prompt": "fix auth.ts"}})
		for len(benchLog) == 0 && seq < 100_000 {
			req := app(event.Draft{RunID: "r1", Type: "llm.request", Actor: "worker", Payload: map[string]any{"role": "worker", "request": map[string]any{
				"messages": []map[string]any{{"role": "user", "content": "continue the plan: step s2, read auth.go and patch the token check"}}, "model": "scripted", "schema_version": "v1"}}})
			app(event.Draft{RunID: "r1", Type: "llm.response", Actor: "worker", ParentID: req[0].ID, Payload: map[string]any{"role": "worker", "response": map[string]any{
				"text": "", "tool_calls": []map[string]any{{"id": fmt.Sprint("c", seq), "name": "repo.read", "args": map[string]any{"path": "auth.go"}}},
				"finish_reason": "tool_use", "usage": map[string]any{"input_tokens": 812, "output_tokens": 41, "cost_usd": 0.0009}, "model": "scripted", "schema_version": "v1"}}})
			inv := app(event.Draft{RunID: "r1", Type: "tool.invoke", Actor: "worker", Payload: map[string]any{"call_id": fmt.Sprint("c", seq), "tool": "repo.read", "args": map[string]any{"path": "auth.go"}}})
			app(event.Draft{RunID: "r1", Type: "tool.result", Actor: "kernel", ParentID: inv[0].ID, Payload: map[string]any{"call_id": fmt.Sprint("c", seq), "tool": "repo.read", "ok": true, "result": map[string]any{"content": "package auth\n\nfunc Check(token string) bool { return token != \"\" }\n"}, "duration_ms": 0.2}})
			app(event.Draft{RunID: "r1", Type: "agent.transition", Actor: "worker", Payload: map[string]any{"from": "WORK", "to": "WORK"}})
		}
		evs, _ := s.Read(ctx, "bench", 1)
		var buf bytes.Buffer
		for i := range evs {
			buf.Write(evs[i].Line())
			buf.WriteByte('\n')
		}
		benchLog, benchN = buf.Bytes(), len(evs)
	})
	return benchLog, benchN
}

func reportEventsPerSec(b *testing.B, n int) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReplayJSONL is replay's throughput from an events.jsonl file.
func BenchmarkReplayJSONL(b *testing.B) {
	log, n := benchJSONL(b)
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		snap, err := ReplayReader(bytes.NewReader(log))
		if err != nil || snap.Events != n {
			b.Fatal(err, snap.Events)
		}
	}
	reportEventsPerSec(b, n)
}

// BenchmarkDecodeEncodingJSON is the baseline: a plain encoding/json decode
// of the same file into event.Event values, folding nothing.
func BenchmarkDecodeEncodingJSON(b *testing.B) {
	log, n := benchJSONL(b)
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dec := json.NewDecoder(bytes.NewReader(log))
		count := 0
		for {
			var e event.Event
			if err := dec.Decode(&e); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			count++
		}
		if count != n {
			b.Fatal(count)
		}
	}
	reportEventsPerSec(b, n)
}

// BenchmarkVerifyJSONL is verify's throughput (hash, canonical form, both
// schemas, pairing) on the same file.
func BenchmarkVerifyJSONL(b *testing.B) {
	log, n := benchJSONL(b)
	reg := schemas.MustDefault()
	b.SetBytes(int64(len(log)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := VerifyReader(reg, bytes.NewReader(log))
		if err != nil || rep.Problem != nil && rep.Problem.Code != ProblemUnpairedLLM {
			b.Fatal(err, rep.Problem)
		}
	}
	reportEventsPerSec(b, n)
}
