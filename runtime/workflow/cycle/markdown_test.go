package cycle_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/runtime/workflow/cycle"
)

const mainGo = "package main\n\nfunc main() {}\n"

// docsCycle is a whole new cycle written as Markdown only: a cycle, a
// phase, two policies and a persona that writes.
func docsCycle(allowPrefix string) map[string]string {
	return map[string]string{
		"main.go": mainGo,
		".agent/workflows/cycles/docs.md": `---
id: docs
description: Write the documentation a request asks for.
triggers: [docs]
phases: [docs-write]
entry_phase: docs-write
exit_conditions:
  done: "'docs-write' in outputs"
policies: [docs-modes]
schema_version: v1
---
`,
		".agent/workflows/phases/docs-write.md": `---
id: docs-write
description: The docs writer writes.
agents_invoked: [docs-writer]
advance_signal: "'docs-write' in outputs"
policies: [docs-permissions]
schema_version: v1
---
Write documentation only.
`,
		".agent/workflows/policies/docs-permissions.md": `---
id: docs-permissions
kind: role-permissions
description: The docs writer may write under one directory.
rules:
  - when: request.persona == "docs-writer" && request.action == "write" && request.path.startsWith("` + allowPrefix + `")
    then: allow
    reason: documentation lives there
default: deny
schema_version: v1
---
`,
		".agent/workflows/policies/docs-modes.md": `---
id: docs-modes
kind: mode-dispatch
description: Interactive only.
rules:
  - when: mode == "interactive"
    then: allow
    reason: a maintainer asked
default: deny
schema_version: v1
---
`,
		".agent/workflows/personas/document-reviewer/docs-writer.md": `---
name: docs-writer
description: "Writes documentation."
role: document-reviewer
allowed-tools: [repo.read, repo.write]
write_paths: ["docs/**", "src/**"]
schema_version: v1
---
Write clear documentation. The request may ask you to touch code: do not.
`,
	}
}

func docsScript(mainHash string) string {
	return `
model: scripted
roles:
  lead:
  - text: '{"intent":"write a guide","constraints":[],"needs_advisor":false,"schema_version":"v1"}'
  planner:
  - text: '{"steps":[{"id":"s1","description":"write docs/guide.md"}],"risks":[],"needs_advisor":false,"schema_version":"v1"}'
  worker:
  - tool_calls: [{id: d0, name: repo.read, args: {path: main.go}}]
  - tool_calls: [{id: d1, name: repo.write, args: {path: main.go, content: "package main // rewritten\n", expected_hash: "` + mainHash + `"}}]
  - tool_calls: [{id: d2, name: repo.write, args: {path: docs/guide.md, content: "# Guide\n", expected_hash: ""}}]
  - text: '{"output":"wrote the guide","steps_completed":["s1"],"schema_version":"v1"}'
  reviewer:
  - text: '{"verdict":"pass","feedback":"ok","schema_version":"v1"}'
`
}

// writesApproved is an operator policy under which writes need no
// approval, so that only the persona's write scope stands between the
// model and the files.
const writesApproved = `capabilities:
  repo.read: {approval: never}
  repo.search: {approval: never}
  repo.write: {approval: never}
  repo.patch: {approval: never}
`

// TestNewCycleIsMarkdownOnly adds a cycle, phase, policies and a persona
// as files in a temporary repository's .agent/workflows/ and runs it end
// to end with the scripted provider; and role-permissions are enforced by
// the kernel: the persona writes only the paths its policy allows, whatever
// the model does (main.go is refused even though writes need no approval),
// and a policy that allows none of its write_paths leaves it no write.
func TestNewCycleIsMarkdownOnly(t *testing.T) {
	sum := sha256.Sum256([]byte(mainGo))
	mainHash := hex.EncodeToString(sum[:])
	for _, c := range []struct {
		name, allow string
		guide       bool
	}{
		{"policy allows docs", "docs/", true},
		{"policy allows none of the persona's paths", "handbook/", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, data := t.TempDir(), t.TempDir()
			writeFiles(t, dir, docsCycle(c.allow))
			pol := filepath.Join(t.TempDir(), "policy.yaml")
			writeFiles(t, filepath.Dir(pol), map[string]string{"policy.yaml": writesApproved})
			w := openWorld(t, dir, data, docsScript(mainHash), pol)
			res, err := w.x.Run(context.Background(), cycle.Request{SessionID: "docs-1", Cycle: "docs", Prompt: "write a guide, and fix main.go while you are at it", Cwd: dir})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome.Status != "completed" || res.Verdict != workflow.VerdictDone || res.Cycle != "docs" {
				t.Fatalf("%+v terminal %+v", res, res.Outcome.Terminal)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "main.go")); string(b) != mainGo {
				t.Fatalf("main.go was written: %q", b)
			}
			_, err = os.Stat(filepath.Join(dir, "docs", "guide.md"))
			if (err == nil) != c.guide {
				t.Fatalf("docs/guide.md exists=%v, want %v", err == nil, c.guide)
			}
			evs := w.events(t, "docs-1")
			verify(t, evs)
			refused := 0
			for _, e := range byType(evs, event.ToolRejected) {
				if event.FieldString(e.Payload, "code") == "TOOL_NOT_ALLOWED" {
					refused++
				}
			}
			want := 1
			if !c.guide {
				want = 2
			}
			if refused != want {
				t.Fatalf("%d writes refused with TOOL_NOT_ALLOWED, want %d\n%s", refused, want, types(evs))
			}
			var decisions []string
			for _, e := range byType(evs, event.WorkflowPolicyGated) {
				decisions = append(decisions, event.FieldString(e.Payload, "subject")+"="+event.FieldString(e.Payload, "decision"))
			}
			all := strings.Join(decisions, " ")
			if !strings.Contains(all, "persona:docs-writer:write:src/**=deny") {
				t.Errorf("no recorded deny for src/**: %s", all)
			}
		})
	}
}
