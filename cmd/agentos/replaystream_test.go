package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

// liveHeap is the heap still reachable after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestVerifyPostgresSessionStreams: agentos verify of a 100,000-event
// session stored in PostgreSQL streams it a page at a time. In the same
// run the session is also read whole (the former path) and verified: the
// live heap while streaming (measured after a collection every 10,000
// events) stays under half of the whole read's. The figures are logged.
func TestVerifyPostgresSessionStreams(t *testing.T) {
	const pairs = 50_000 // + session.start: 100,001 events
	ctx := context.Background()
	st, u := openPGStore(t)
	const sid = "pg-stream-1"
	evs, err := st.Append(ctx, sid, 0, event.Draft{RunID: "r1", Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "a long session"}})
	if err != nil {
		t.Fatal(err)
	}
	seq := evs[0].Seq
	output := strings.Repeat("ok ", 60)
	start := time.Now()
	for i := 0; i < pairs; {
		// A batch of invokes, then their results (each names its invoke).
		var invokes []event.Draft
		for j := 0; j < 500 && i+j < pairs; j++ {
			call := fmt.Sprint("c", i+j)
			invokes = append(invokes, event.Draft{RunID: "r1", Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": call, "tool": "repo.read", "args": map[string]any{"path": "pkg/file" + call + ".go"}}})
		}
		inv, err := st.Append(ctx, sid, seq, invokes...)
		if err != nil {
			t.Fatal(err)
		}
		results := make([]event.Draft, len(inv))
		for j, e := range inv {
			call := fmt.Sprint("c", i+j)
			results[j] = event.Draft{RunID: "r1", Type: event.ToolResult, Actor: "kernel", ParentID: e.ID, Payload: map[string]any{"call_id": call, "tool": "repo.read", "ok": true, "output": output}}
		}
		res, err := st.Append(ctx, sid, inv[len(inv)-1].Seq, results...)
		if err != nil {
			t.Fatal(err)
		}
		seq = res[len(res)-1].Seq
		i += len(inv)
	}
	st.Close()
	const total = 2*pairs + 1
	t.Logf("stored %d events in %v", total, time.Since(start).Round(time.Millisecond))
	t.Setenv("AGENTOS_DATABASE_URL", u)

	verify := func(v *replay.Verifier, e *event.Event) error {
		if p := v.Line(0, e.Line(), false); p != nil {
			return fmt.Errorf("event %d: %+v", e.Seq, p)
		}
		return nil
	}

	// The whole session in memory, then verified.
	base := liveHeap()
	begin := time.Now()
	all, err := readStoreSession(ctx, "", sid)
	if err != nil {
		t.Fatal(err)
	}
	v := replay.NewVerifier(schemas.MustDefault())
	for i := range all {
		if err := verify(v, &all[i]); err != nil {
			t.Fatal(err)
		}
	}
	whole := liveHeap() - base
	wholeTime := time.Since(begin)
	if rep := v.Finish(); !rep.Valid || rep.Events != total {
		t.Fatalf("whole read: %+v", rep)
	}
	runtime.KeepAlive(all)
	all, v = nil, nil

	// Streamed, as agentos verify reads it now.
	base = liveHeap()
	begin = time.Now()
	v = replay.NewVerifier(schemas.MustDefault())
	var peak uint64
	n := 0
	err = scanStoreSession(ctx, "", sid, "verify", func(e *event.Event) error {
		n++
		if n%10_000 == 0 {
			if h := liveHeap(); h > base && h-base > peak {
				peak = h - base
			}
		}
		return verify(v, e)
	})
	if err != nil {
		t.Fatal(err)
	}
	streamTime := time.Since(begin)
	if rep := v.Finish(); !rep.Valid || rep.Events != total || n != total {
		t.Fatalf("streamed: %d events, %+v", n, rep)
	}
	t.Logf("live heap: whole read + verify %.1f MiB (%v); streamed verify at most %.1f MiB (%v, with a collection every 10,000 events)",
		float64(whole)/(1<<20), wholeTime.Round(time.Millisecond), float64(peak)/(1<<20), streamTime.Round(time.Millisecond))
	if peak*2 >= whole {
		t.Errorf("streaming held %d bytes live, not under half of the whole read's %d", peak, whole)
	}

	// The command itself.
	out, errOut, code := runCLI(t, "verify", sid, "--json")
	var rep struct {
		Valid  bool
		Events int
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || !rep.Valid || rep.Events != total {
		t.Fatalf("agentos verify: exit %d %+v\n%.300s%s", code, rep, out, errOut)
	}
}
