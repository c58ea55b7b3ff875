package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/argv"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	agentrun "github.com/agentos/agentos/runtime/run"
)

// TestCLIPauseOutputCommandsWork: `agentos run` paused for approval
// prints what the approval would do (the diff), the demo's first,
// failing go test as failed with its exit code, and tokens and cost; the
// approve and deny lines it prints, run exactly as printed, answer the
// approval, and the final summary shows the evidence of the log.
func TestCLIPauseOutputCommandsWork(t *testing.T) {
	script := filepath.Join("..", "..", "runtime", "demo", "testdata", "fix-auth.script.yaml")
	for _, decision := range []string{"approve", "deny"} {
		t.Run(decision, func(t *testing.T) {
			repo, data := t.TempDir(), t.TempDir()
			if err := demo.WriteSample(repo); err != nil {
				t.Fatal(err)
			}
			out, code := cliChild(t, "", "run", "--session", "s-"+decision, "--repo", repo, "--data", data, "--provider", "scripted", "--script", script, demo.Prompt)
			if code != exitApproval {
				t.Fatalf("run: exit %d, want %d\n%s", code, exitApproval, out)
			}
			for _, want := range []string{
				"approval ap-",
				"    -\treturn strings.HasPrefix(expected, given)\n",
				"    +\treturn subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1\n",
				"test.run go test -count=1 ./...: exit 1, failed",
				"command  test.run go test -count=1 ./...: exit 1, failed\n",
				"usage    7266 input + 441 output tokens over 5 model calls, cost not tracked (no price is known for scripted-demo)\n",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("the paused run's output lacks %q:\n%s", want, out)
				}
			}
			line := ""
			for _, l := range strings.Split(out, "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(l), decision+":"); ok {
					line = strings.TrimSpace(rest)
				}
			}
			args, err := argv.Split(line)
			if err != nil || len(args) < 4 || args[0] != "agentos" || args[1] != decision {
				t.Fatalf("no runnable %s line (%q, %v) in:\n%s", decision, line, err, out)
			}
			// Run it as printed, from another directory.
			wd, _ := os.Getwd()
			if err := os.Chdir(t.TempDir()); err != nil {
				t.Fatal(err)
			}
			out, code = cliChild(t, "", args[1:]...)
			os.Chdir(wd)
			logPath := filepath.Join(data, "sessions", "s-"+decision, "events.jsonl")
			evs, err := readJSONL(logPath)
			if err != nil {
				t.Fatal(err)
			}
			answered := ""
			for _, e := range evs {
				if e.Type == event.ApprovalResolved {
					answered = event.FieldString(e.Payload, "decision")
				}
			}
			if answered != decision {
				t.Fatalf("the log records the answer %q, want %q; the printed command printed (exit %d):\n%s", answered, decision, code, out)
			}
			switch decision {
			case "approve":
				if code != exitOK {
					t.Fatalf("approve: exit %d\n%s", code, out)
				}
				for _, want := range []string{
					"status   completed\n",
					"command  test.run go test -count=1 ./...: exit 1, failed\ncommand  test.run go test -count=1 ./...: exit 0, passed\n",
					"changed  auth.go (modify, +2 -2)\n",
					"    +\treturn subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1\n",
					"review   reviewer pass\n",
					"usage    14673 input + 629 output tokens over 8 model calls, cost not tracked",
				} {
					if !strings.Contains(out, want) {
						t.Errorf("the final summary lacks %q:\n%s", want, out)
					}
				}
			case "deny":
				if strings.Contains(out, "changed  auth.go") {
					t.Errorf("a denied patch shows as a change:\n%s", out)
				}
				if !strings.Contains(out, "usage    ") {
					t.Errorf("the final summary has no usage:\n%s", out)
				}
			}
		})
	}
}

func TestPrintPreview(t *testing.T) {
	tests := []struct {
		name    string
		preview string
		args    string
		want    []string
	}{
		{"diff", `{"diff":"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\u001b[2J\n"}`, ``, []string{"    -a\n", "    +b?[2J\n"}},
		{"command", `{"command":"make release","cwd":"tools"}`, ``, []string{"command: make release\n", "in:      tools\n"}},
		{"the patch in the arguments", `{}`, `{"unifiedDiff":"--- a/y\n+++ b/y\n"}`, []string{"    --- a/y\n"}},
		{"nothing to show", `{}`, `{}`, []string{"the approval shows no diff or command"}},
		{"protected", `{"diff":"+x\n","protected_paths":[".github/workflows/ci.yml"]}`, ``, []string{"changes protected configuration: .github/workflows/ci.yml\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			p := agentrun.Pending{ApprovalID: "ap-1", Tool: "x", Preview: json.RawMessage(tc.preview)}
			if tc.args != "" {
				p.Args = json.RawMessage(tc.args)
			}
			printPreview(&b, p, "/tmp/events.jsonl")
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("lacks %q:\n%s", w, b.String())
				}
			}
			if strings.Contains(b.String(), "\x1b") {
				t.Errorf("an escape sequence reached the terminal:\n%q", b.String())
			}
		})
	}
}

// A printed line splits back into the same arguments, whatever the
// paths hold.
func TestShellLineRoundTrips(t *testing.T) {
	args := []string{"agentos", "approve", "s-1", "ap-1", "--repo", "/tmp/my repo", "--data", "/tmp/it's", "--script", `/tmp/a"b$c`, "--policy", ""}
	got, err := argv.Split(shellLine(args))
	if err != nil || strings.Join(got, "\x00") != strings.Join(args, "\x00") {
		t.Fatalf("%q splits into %q (%v)", shellLine(args), got, err)
	}
}
