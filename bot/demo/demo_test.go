package demo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
)

func needGit(t *testing.T) {
	t.Helper()
	testenv.LookPath(t, "git")
}

// TestRunCompletes plays the scenario and checks its end state on disk
// with the git CLI, independently of what the walkthrough printed.
func TestRunCompletes(t *testing.T) {
	needGit(t)
	dir := t.TempDir()
	var out, log bytes.Buffer
	rep, err := Run(context.Background(), Options{Dir: dir, Out: &out, Log: &log})
	if err != nil {
		t.Fatalf("Run: %v\n%s\nlog:\n%s", err, out.String(), log.String())
	}
	if rep.Status != "completed" || rep.PR == 0 || rep.Branch != "agent/"+rep.SessionID {
		t.Fatalf("report = %+v", rep)
	}
	if !rep.Verify.Valid || !rep.Verify.Closed || rep.Verify.Events == 0 {
		t.Errorf("verify = %+v", rep.Verify)
	}
	if got, want := rep.LogPath, filepath.Join(dir, "events.jsonl"); got != want {
		t.Errorf("LogPath = %q, want %q", got, want)
	}
	home, bare := filepath.Join(dir, "home"), filepath.Join(dir, "github", "git", Owner, Name+".git")
	ctx := context.Background()
	fixed, err := git(ctx, home, bare, "show", rep.Branch+":auth.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fixed, "subtle.ConstantTimeCompare") {
		t.Errorf("auth.go on %s is not the approved patch:\n%s", rep.Branch, fixed)
	}
	committed, err := git(ctx, home, bare, "show", "agent-sessions:sessions/"+rep.SessionID+"/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	copied, err := os.ReadFile(rep.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(copied) != committed+"\n" {
		t.Error("events.jsonl in Dir differs from the committed log")
	}
	if log.Len() > 0 {
		t.Errorf("the bot logged warnings:\n%s", log.String())
	}
}

func TestRunRefusesBadDir(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		want error
	}{
		{"not empty", full, ErrDirNotEmpty},
		{"missing", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), Options{Dir: tc.dir})
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
