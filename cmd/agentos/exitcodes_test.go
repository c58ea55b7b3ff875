package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/demo"
)

// Scripts for runs that end each way.
const (
	greetScript = "../../testdata/scripts/greet.yaml"
	// The model endpoint rejects the key: the run fails with PROVIDER_ERROR.
	failingScript = `roles:
  lead:
    - error: {message: "401 Unauthorized: invalid x-api-key", status: 401}
`
)

func writeFile(t *testing.T, dir, rel, content string) string {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunExitCodes: agentos run, approve, deny and resume exit with the
// code of the run's outcome, so a script or a CI step can branch on it.
func TestRunExitCodes(t *testing.T) {
	failing := writeFile(t, t.TempDir(), "failing.yaml", failingScript)
	fixAuth := filepath.Join("..", "..", "runtime", "demo", "testdata", "fix-auth.script.yaml")
	sample := func(t *testing.T) string {
		t.Helper()
		repo := t.TempDir()
		if err := demo.WriteSample(repo); err != nil {
			t.Fatal(err)
		}
		return repo
	}
	// A repository whose UserPromptSubmit hook refuses every prompt.
	denying := func(t *testing.T) string {
		t.Helper()
		repo := t.TempDir()
		writeFile(t, repo, ".agent/settings.json", `{"hooks":{"UserPromptSubmit":[{"hooks":[{"type":"command","command":"echo 'no requests today' >&2; exit 2"}]}]}}`)
		return repo
	}
	cases := []struct {
		name   string
		repo   func(t *testing.T) string
		script string
		code   int
		status string // "" when no run report is printed
		stderr string
	}{
		{"completed", func(t *testing.T) string { return t.TempDir() }, greetScript, exitOK, "completed", ""},
		{"provider rejects the key", func(t *testing.T) string { return t.TempDir() }, failing, exitRunFailed, "failed", "the run failed"},
		{"prompt denied by a hook", denying, greetScript, exitBlocked, "denied", "the run was denied"},
		{"paused for approval", sample, fixAuth, exitApproval, "paused", "paused for approval"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			repo, data := c.repo(t), t.TempDir()
			out, errOut, code := runCLI(t, "run", "--repo", repo, "--data", data, "--provider", "scripted", "--script", c.script, "--json", "--session", "s-exit", "do the thing")
			var r runReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("stdout is not the JSON report: %v\n%s%s", err, out, errOut)
			}
			if code != c.code || r.Status != c.status {
				t.Fatalf("exit %d status %s, want %d %s\n%s%s", code, r.Status, c.code, c.status, out, errOut)
			}
			if !strings.Contains(errOut, c.stderr) {
				t.Errorf("stderr %q does not say %q", errOut, c.stderr)
			}
			if c.status != "paused" {
				return
			}
			// Starting the paused session again is refused with the same code.
			if _, errOut, code := runCLI(t, "run", "--repo", repo, "--data", data, "--provider", "scripted", "--script", c.script, "--session", "s-exit", "again"); code != exitApproval || !strings.Contains(errOut, "agentos approve") {
				t.Errorf("run on a paused session: exit %d %s", code, errOut)
			}
			// Denying resumes the run to its end; the exit code follows the outcome.
			out, errOut, code = runCLI(t, "deny", "s-exit", r.Pending[0].ApprovalID, "--repo", repo, "--data", data, "--provider", "scripted", "--script", c.script, "--json", "--by", "octocat", "--reason", "not today")
			var r2 runReport
			if json.Unmarshal([]byte(out), &r2) != nil || r2.Status == "paused" || code != statusExit[r2.Status] {
				t.Errorf("deny: exit %d status %q\n%s%s", code, r2.Status, out, errOut)
			}
		})
	}
	// Errors that are not outcomes keep their codes.
	if _, _, code := runCLI(t, "run", "--repo", t.TempDir(), "--provider", "scripted", "--script", greetScript); code != exitUsage {
		t.Errorf("run without a prompt: exit %d, want %d", code, exitUsage)
	}
	if _, _, code := runCLI(t, "resume", "no-such-session", "--repo", t.TempDir(), "--data", t.TempDir(), "--provider", "scripted", "--script", greetScript); code != exitFailure {
		t.Errorf("resume of an unknown session: exit %d, want %d", code, exitFailure)
	}
}

// TestFailedRunExitsNonZeroAsAProcess builds the real binary and runs it:
// a run whose model fails exits 5 at the OS level (not only in run()'s
// return value), with the failure on stderr and the report on stdout.
func TestFailedRunExitsNonZeroAsAProcess(t *testing.T) {
	goBin := testenv.LookPath(t, "go")
	bin := filepath.Join(t.TempDir(), "agentos")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	failing := writeFile(t, t.TempDir(), "failing.yaml", failingScript)
	for _, c := range []struct {
		script string
		code   int
	}{
		{failing, exitRunFailed},
		{greetScript, exitOK},
	} {
		cmd := exec.Command(bin, "run", "--repo", t.TempDir(), "--data", t.TempDir(), "--provider", "scripted", "--script", c.script, "say hello")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if got := cmd.ProcessState.ExitCode(); got != c.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", c.script, got, c.code, stdout.String(), stderr.String())
		}
		if c.code == exitRunFailed && (!strings.Contains(stdout.String(), "terminal failed (auth_error): PROVIDER_ERROR") || !strings.Contains(stderr.String(), "agentos: session")) {
			t.Errorf("the failure is not reported:\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
		}
	}
}
