package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
)

// TestReplayVerifyStoredSession: agentos verify and agentos replay take a
// session id and stream it from the embedded store (--data), across more
// events than one read chunk; an unknown session is a failure, not an
// empty success.
func TestReplayVerifyStoredSession(t *testing.T) {
	dir := t.TempDir()
	sealer, err := newSealer(nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(dir, sealer)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	evs, err := st.Append(ctx, "stored-1", 0, event.Draft{RunID: "r1", Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "stream me"}})
	if err != nil {
		t.Fatal(err)
	}
	seq := evs[0].Seq
	const calls = 300 // 600 tool events: more than one chunk of store.Scan
	for i := 0; i < calls; i++ {
		call := fmt.Sprint("c", i)
		inv, err := st.Append(ctx, "stored-1", seq, event.Draft{RunID: "r1", Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": call, "tool": "repo.read", "args": map[string]any{}}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Append(ctx, "stored-1", inv[0].Seq, event.Draft{RunID: "r1", Type: event.ToolResult, Actor: "kernel", ParentID: inv[0].ID, Payload: map[string]any{"call_id": call, "tool": "repo.read", "ok": true}})
		if err != nil {
			t.Fatal(err)
		}
		seq = res[0].Seq
	}
	st.Close()

	out, errOut, code := runCLI(t, "verify", "stored-1", "--data", dir, "--json")
	var rep struct {
		Valid  bool
		Events int
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || !rep.Valid || rep.Events != 2*calls+1 {
		t.Fatalf("verify of a stored session: exit %d %+v\n%s%s", code, rep, out, errOut)
	}
	out, errOut, code = runCLI(t, "replay", "stored-1", "--data", dir, "--json")
	var snap struct {
		Events       int
		Prompt       string
		ToolsInvoked []struct{ Completed bool } `json:"tools_invoked"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &snap) != nil || snap.Events != 2*calls+1 || snap.Prompt != "stream me" || len(snap.ToolsInvoked) != calls || !snap.ToolsInvoked[calls-1].Completed {
		t.Fatalf("replay of a stored session: exit %d %+v\n%.500s%s", code, snap, out, errOut)
	}
	out, _, code = runCLI(t, "replay", "stored-1", "--data", dir)
	if code != exitOK || strings.Count(out, "tool.result") != calls {
		t.Fatalf("replay trace: exit %d, %d tool.result lines", code, strings.Count(out, "tool.result"))
	}
	for _, cmd := range []string{"verify", "replay"} {
		if _, errOut, code := runCLI(t, cmd, "no-such-session", "--data", dir); code == exitOK || !strings.Contains(errOut, "no session no-such-session") {
			t.Errorf("%s of an unknown session: exit %d %s", cmd, code, errOut)
		}
	}
}
