package replay

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
)

func TestWorkspaceChanges(t *testing.T) {
	h := func(c string) string { return strings.Repeat(c, 64) }
	var evs []event.Event
	seq := int64(0)
	add := func(typ, id, parent string, payload any) {
		seq++
		b, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		e := event.Event{ID: id, Seq: seq, Type: typ, Payload: b}
		if parent != "" {
			e.ParentID = &parent
		}
		evs = append(evs, e)
	}
	call := func(id, tool string, ok bool, result any) {
		add(event.ToolInvoke, id, "", map[string]any{"call_id": id, "tool": tool, "args": map[string]any{}})
		p := map[string]any{"call_id": id, "tool": tool, "ok": ok}
		if ok {
			p["result"] = result
		} else {
			p["error"] = map[string]any{"code": "WRITE_CONFLICT"}
		}
		add(event.ToolResult, id+"-r", id, p)
	}
	file := func(path, op, hash string) map[string]any {
		f := map[string]any{"path": path, "op": op}
		if hash != "" {
			f["hash"] = hash
		}
		return f
	}
	add(event.RunStarted, "run1", "", map[string]any{"run_id": "r1"})
	call("w1", "repo.write", true, map[string]any{"path": "a.go", "hash": h("1")})
	call("w2", "repo.write", true, map[string]any{"path": "./b.go", "hash": h("2")})
	call("w3", "repo.write", false, nil) // refused: changed nothing
	call("p1", "repo.patch", true, map[string]any{"files": []any{
		file("c.go", "create", h("3")),
		file("old.go", "delete", ""),
		map[string]any{"path": "new.go", "old_path": "moved.go", "op": "rename", "hash": h("4")},
	}, "lines_added": 1, "lines_removed": 1})
	call("x1", "process.run", true, map[string]any{"command": "make", "exit_code": 0})
	call("m1", "mcp.fs.write_file", true, map[string]any{"path": "evil.yml", "hash": h("9")})
	// A patch recorded before results carried hashes names no content.
	call("p0", "repo.patch", true, map[string]any{"files": []any{file("legacy.go", "modify", "")}})
	add(event.RunPaused, "pause", "", map[string]any{"reason": "approval"})
	// A later run: the last change of a path wins.
	add(event.RunResumed, "res", "", map[string]any{"reason": "approval"})
	call("w4", "repo.write", true, map[string]any{"path": "a.go", "hash": h("5")})
	call("p2", "repo.patch", true, map[string]any{"files": []any{file("b.go", "delete", "")}})
	call("w5", "repo.write", true, map[string]any{"path": "old.go", "hash": h("6")})
	// A result whose invoke is not a file tool's, and one without invoke.
	add(event.ToolResult, "orphan", "nobody", map[string]any{"tool": "repo.write", "ok": true, "result": map[string]any{"path": "z.go", "hash": h("7")}})

	got := WorkspaceChanges(evs, 0)
	want := []FileChange{
		{Path: "c.go", SHA256: h("3")},
		{Path: "moved.go"},
		{Path: "new.go", SHA256: h("4")},
		{Path: "a.go", SHA256: h("5")},
		{Path: "b.go"},
		{Path: "old.go", SHA256: h("6")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n got %+v\nwant %+v", got, want)
	}
	if got := WorkspaceChanges(nil, 0); len(got) != 0 {
		t.Errorf("no events: %v", got)
	}
	// After the pause (a commit holds what came before it): the later
	// run's changes only.
	var pause int64
	for _, e := range evs {
		if e.Type == event.RunPaused {
			pause = e.Seq
		}
	}
	got = WorkspaceChanges(evs, pause)
	want = []FileChange{{Path: "a.go", SHA256: h("5")}, {Path: "b.go"}, {Path: "old.go", SHA256: h("6")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes after seq %d:\n got %+v\nwant %+v", pause, got, want)
	}
}
