package run

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/journal"
)

// TestUndoInterrupted: an interrupted repo.patch (invoked, no result) that
// landed in a worktree changed in place is undone, one that did not land
// is left alone, and the worktree then holds exactly what the log's
// results say; calls whose effect cannot be told (a command, a write that
// landed, a diff that applies neither way) are not rebuildable, and a
// call with a result is never touched.
func TestUndoInterrupted(t *testing.T) {
	diff := "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n keep\n-one\n+two\n tail\n"
	const before, after = "keep\none\ntail\n", "keep\ntwo\ntail\n"
	for _, tc := range []struct {
		name, file, want string
		call             func(t *testing.T, j *journal.Journal)
		restored         int
		notRebuildable   string
	}{
		{name: "patch landed", file: after, want: before, restored: 1,
			call: func(t *testing.T, j *journal.Journal) {
				recorded(t, j, "c1", "repo.patch", map[string]any{"unifiedDiff": diff}, nil)
			}},
		{name: "patch did not land", file: before, want: before,
			call: func(t *testing.T, j *journal.Journal) {
				recorded(t, j, "c1", "repo.patch", map[string]any{"unifiedDiff": diff}, nil)
			}},
		{name: "patch with its result", file: after, want: after,
			call: func(t *testing.T, j *journal.Journal) {
				recorded(t, j, "c1", "repo.patch", map[string]any{"unifiedDiff": diff}, map[string]any{"ok": true})
			}},
		{name: "read-only call", file: before, want: before,
			call: func(t *testing.T, j *journal.Journal) { recorded(t, j, "c1", "test.run", map[string]any{}, nil) }},
		{name: "file changed otherwise", file: "keep\nthree\ntail\n", want: "keep\nthree\ntail\n", notRebuildable: "neither way",
			call: func(t *testing.T, j *journal.Journal) {
				recorded(t, j, "c1", "repo.patch", map[string]any{"unifiedDiff": diff}, nil)
			}},
		{name: "command", file: before, want: before, notRebuildable: "was running",
			call: func(t *testing.T, j *journal.Journal) {
				recorded(t, j, "c1", "process.run", map[string]any{"command": "make"}, nil)
			}},
		{name: "write landed", file: "new\n", want: "new\n", notRebuildable: "does not hold its content before",
			call: func(t *testing.T, j *journal.Journal) {
				recorded(t, j, "c1", "repo.write", map[string]any{"path": "a.txt", "content": "new\n"}, nil)
			}},
		{name: "write did not land", file: before, want: before,
			call: func(t *testing.T, j *journal.Journal) {
				recorded(t, j, "c1", "repo.write", map[string]any{"path": "a.txt", "content": "new\n"}, nil)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, script(finalReport), nil)
			ctx := context.Background()
			sid := "undo-" + strings.ReplaceAll(tc.name, " ", "-")
			j, err := journal.Open(ctx, f.store, sid)
			must(t, err)
			j.SetRun("run-1")
			_, err = j.Append(ctx, event.SessionStart, "user", map[string]any{"prompt": "edit"}, "")
			must(t, err)
			_, err = j.Append(ctx, event.RunStarted, "runtime", map[string]any{"run_id": "run-1", "prompt": "edit"}, "")
			must(t, err)
			tc.call(t, j)
			dir := t.TempDir()
			must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte(tc.file), 0o644))
			n, err := UndoInterrupted(dir, f.events(t, sid), "run-1")
			var nr *NotRebuildableError
			switch {
			case tc.notRebuildable != "":
				if !errors.As(err, &nr) || !strings.Contains(err.Error(), tc.notRebuildable) {
					t.Fatalf("err = %v, want not rebuildable: %q", err, tc.notRebuildable)
				}
			case err != nil || n != tc.restored:
				t.Fatalf("undo: %d restored, %v; want %d", n, err, tc.restored)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(got) != tc.want {
				t.Errorf("a.txt = %q, want %q", got, tc.want)
			}
		})
	}
}
