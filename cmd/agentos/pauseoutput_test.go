package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/argv"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
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
