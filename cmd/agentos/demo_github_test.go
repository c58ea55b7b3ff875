package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
)

// TestDemoGitHub runs `agentos demo --github` and checks what a newcomer
// watching it would notice: the draft PR, the approval review with the
// diff and the approval id, the Approve, the completed run with the PR
// ready, the git facts, and a log that verifies, with no credential in
// sight.
func TestDemoGitHub(t *testing.T) {
	testenv.LookPath(t, "git")
	out := t.TempDir()
	stdout, stderr, code := runCLI(t, "demo", "--github", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	facts := []struct {
		name string
		re   string
	}{
		{"the maintainer's command", `(?m)^  │ /agent fix the failing token check in auth\.go$`},
		{"tracking comment while paused", `(?s)comment by agentos\[bot\] on issue #1 \(while paused\)\n.*Paused — waiting for approval`},
		{"draft PR opened", `agentos\[bot\] opens draft pull request #\d+: "[^"]+" \(agent/[0-9a-z-]+ → main\)`},
		{"approval review with a diff", "(?s)review by agentos\\[bot\\] on pull request #\\d+ \\(COMMENTED[^\\n]*\\n.*approval `ap-[0-9a-f]+`.*  │ ```diff\\n"},
		{"the maintainer approves", `review by mona on pull request #\d+ \(APPROVED\)`},
		{"the run completes", `resumes the run: it ends completed`},
		{"final tracking comment", `(?s)comment, edited by agentos\[bot\] on issue #1 \(final\)\n.*✅ Completed`},
		{"PR ready", `pull request #\d+ is ready for review`},
		{"commit trailers", `(?m)^ +Agent-Session: [0-9a-z-]+\n +Agent-Run: run-[0-9A-Z]+$`},
		{"artifact files", `(?m)^ +sessions/[0-9a-z-]+/events\.jsonl$`},
		{"verify OK", `(?m)^  agentos verify: OK$`},
	}
	for _, f := range facts {
		if !regexp.MustCompile(f.re).MatchString(stdout) {
			t.Errorf("output lacks %s (/%s/)", f.name, f.re)
		}
	}
	// The steps come in the order they happen on GitHub.
	last := -1
	for _, step := range []string{"── 1. ", "── 2. ", "── 3. ", "── 4. ", "── 5. ", "── 6. "} {
		i := strings.Index(stdout, step)
		if i <= last {
			t.Errorf("step %q at %d, after %d", step, i, last)
		}
		last = i
	}
	// No credential reaches the terminal: neither an installation token nor
	// a URL carrying one.
	for _, re := range []string{`ghs_[A-Za-z0-9]{10,}`, `x-access-token:`, `://[^/\s]*@`} {
		if m := regexp.MustCompile(re).FindString(stdout + stderr); m != "" {
			t.Errorf("output shows a credential: %q", m)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}

	// The log the demo copied out of the artifact branch passes verify.
	log := filepath.Join(out, "events.jsonl")
	if vout, verr, code := runCLI(t, "verify", log); code != 0 {
		t.Errorf("agentos verify %s: exit %d\n%s%s", log, code, vout, verr)
	}
	// Nothing the demo left on disk holds the token either (the worktree
	// cache's remotes, the store, the bare repository).
	err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if m := regexp.MustCompile(`ghs_[A-Za-z0-9]{36}`).Find(b); m != nil {
			t.Errorf("%s holds a token", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDemoGitHubUsage checks the flag combinations a user can get wrong.
func TestDemoGitHubUsage(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    int
		wantErr string
	}{
		{"ask has no meaning on GitHub", []string{"demo", "--github", "--ask"}, exitUsage, "--ask and --github"},
		{"out is not empty", []string{"demo", "--github", "--out", full}, exitUsage, "not empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCLI(t, tc.args...)
			if code != tc.want || !strings.Contains(stderr, tc.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, tc.want, tc.wantErr)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep.txt")); err != nil || string(b) != "mine" {
		t.Errorf("the demo touched a file in a non-empty --out: %q, %v", b, err)
	}
}
