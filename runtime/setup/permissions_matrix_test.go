package setup_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/runtime/setup"
)

// The permissions matrix: Claude Code's allow, ask and deny rules (and no
// rule) × the kinds of tool (a read, a write, a shell command, the
// project's tests, an MCP tool) × the operator's claudeCode.honorAllow
// (off, on), each call dispatched through the kernel setup.Build
// assembles from real files: the operator's policy.yaml, the repository's
// .claude/settings.json, .agent/config.yaml. The operator's policy asks
// for approval of every one of these tools, so what the rules change is
// visible: a deny refuses, an ask waits for approval, an allow runs the
// call only when the operator opts in, and then the tool.invoke names the
// rule.

// matrixOutcome is how a dispatch ended.
type matrixOutcome string

const (
	refused  matrixOutcome = "refused"
	approval matrixOutcome = "needs approval"
	runs     matrixOutcome = "runs"
)

// matrixKind is a kind of tool: a call of it and the rule that names it.
type matrixKind struct {
	name, tool, args, rule string
}

var matrixKinds = []matrixKind{
	{"read", "repo.read", `{"path":"notes.txt"}`, "Read(notes.txt)"},
	{"write", "repo.write", `{"path":"src/new.txt","content":"x\n","expected_hash":""}`, "Edit(src/**)"},
	{"shell", "process.run", `{"command":"echo hello"}`, "Bash(echo:*)"},
	{"tests", "test.run", `{}`, "Bash(echo:*)"},
	{"mcp", "mcp.docs.lookup", `{"q":"x"}`, "mcp__docs__lookup"},
}

const matrixOperatorPolicy = `capabilities:
  repo.read: {approval: always}
  repo.write: {approval: always}
  process.run: {approval: always}
  test.run: {approval: always}
risk:
  highRiskCommands: [rm]
`

// matrixNeverPolicy asks for no approval of these tools.
const matrixNeverPolicy = `capabilities:
  repo.read: {approval: never}
  repo.write: {approval: never}
  process.run: {approval: never}
  test.run: {approval: never}
  mcp.docs.lookup: {approval: never}
`

const matrixOptIn = `claudeCode:
  honorAllow: [repo.read, repo.write, process.run, test.run, mcp.docs.*]
`

// matrixRepo writes a repository with the settings and the policy file.
func matrixRepo(t *testing.T, settings map[string]string, operator string) setup.Options {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"notes.txt":          "notes\n",
		"src/keep.txt":       "keep\n",
		".agent/config.yaml": "test: echo tests-ok\n",
	}
	for k, v := range settings {
		files[k] = v
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := options(t, dir)
	o.PolicyFile = filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(o.PolicyFile, []byte(operator), 0o644); err != nil {
		t.Fatal(err)
	}
	// The commands are echo: they run unconfined, so that the matrix does
	// not depend on the machine's sandbox.
	sb, err := setup.Sandbox(context.Background(), func(k string) string {
		if k == sandbox.EnvMode {
			return "none"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	o.Sandbox = sb
	return o
}

// mcpDocsTool stands for a tool of a mounted HTTP MCP server named docs,
// as the MCP client registers it (mcp.<server>.<tool>, category network;
// the policy names no MCP tool, so it needs approval).
func mcpDocsTool() kernel.ToolDef {
	return kernel.ToolDef{Name: "mcp.docs.lookup", Description: "look a document up", Category: kernel.CategoryNetwork,
		Input:  json.RawMessage(`{"type":"object"}`),
		Output: json.RawMessage(`{"type":"object"}`),
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			return map[string]any{"content": []any{}}, nil
		}}
}

// matrixDispatch builds the environment and dispatches one call: its
// outcome, the refusal or pending reason, and the recorded events.
func matrixDispatch(t *testing.T, o setup.Options, tool, args string) (matrixOutcome, string, *memRecorder) {
	t.Helper()
	env, err := setup.Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Kernel.Register(mcpDocsTool()); err != nil {
		t.Fatal(err)
	}
	rec := &memRecorder{}
	out, err := env.Kernel.Dispatch(context.Background(), rec, kernel.Call{ID: "c1", Name: tool, Args: json.RawMessage(args), Caller: "worker"})
	var ke *kernel.Error
	switch {
	case errors.As(err, &ke) && (ke.Code == kernel.CodeToolNotAllowed || ke.Code == kernel.CodePolicyDenied):
		return refused, string(ke.Code) + ": " + ke.Message, rec
	case err != nil:
		t.Fatalf("%s: %v", tool, err)
	case out.Pending != nil:
		return approval, out.Pending.Risk.Reason, rec
	case out.Result == nil:
		t.Fatalf("%s: neither a result nor a pending approval", tool)
	}
	return runs, "", rec
}

// invoked is the tool.invoke payload recorded, or nil.
func invoked(t *testing.T, rec *memRecorder) map[string]any {
	t.Helper()
	for _, e := range rec.events {
		if body, ok := strings.CutPrefix(e, "tool.invoke "); ok {
			var p map[string]any
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	return nil
}

func TestPermissionsMatrix(t *testing.T) {
	for _, list := range []string{"", "allow", "ask", "deny"} {
		for _, k := range matrixKinds {
			for _, optIn := range []bool{false, true} {
				name := list
				if name == "" {
					name = "no-rule"
				}
				name += "/" + k.name
				if optIn {
					name += "/opt-in"
				}
				t.Run(name, func(t *testing.T) {
					settings := map[string]string{}
					if list != "" {
						b, _ := json.Marshal(map[string]any{"permissions": map[string]any{list: []string{k.rule}}})
						settings[".claude/settings.json"] = string(b)
					}
					operator := matrixOperatorPolicy
					if optIn {
						operator += matrixOptIn
					}
					want := approval
					switch {
					case list == "deny":
						want = refused
					case list == "allow" && optIn:
						want = runs
					}
					got, why, rec := matrixDispatch(t, matrixRepo(t, settings, operator), k.tool, k.args)
					if got != want {
						t.Fatalf("%s %s: %s (%s), want %s", k.tool, k.args, got, why, want)
					}
					inv := invoked(t, rec)
					switch got {
					case refused:
						if !strings.Contains(why, k.rule) || inv != nil {
							t.Errorf("refusal %q does not name %s, or the tool was invoked: %v", why, k.rule, inv)
						}
					case approval:
						if !strings.HasPrefix(why, "policy: ") {
							t.Errorf("approval reason %q, want the policy's", why)
						}
					case runs:
						pre, _ := inv["preapproved"].(map[string]any)
						if pre["rule"] != k.rule || pre["source"] != ".claude/settings.json permissions.allow" || !strings.HasPrefix(pre["policy"].(string), "claudeCode.honorAllow ") {
							t.Errorf("tool.invoke %v does not record the pre-approving rule %s", inv, k.rule)
						}
					}
					if got != runs && inv != nil {
						t.Errorf("invoked without a pre-approval: %v", inv)
					}
					if list != "ask" {
						return
					}
					// Where the policy asks for no approval, the ask rule does.
					operator = matrixNeverPolicy
					if optIn {
						operator += matrixOptIn
					}
					if got, why, _ := matrixDispatch(t, matrixRepo(t, settings, operator), k.tool, k.args); got != approval || !strings.Contains(why, ".claude/settings.json permissions.ask rule "+k.rule) {
						t.Errorf("under a policy that never asks: %s (%s), want approval for the ask rule %s", got, why, k.rule)
					}
				})
			}
		}
	}
}

// TestAllowNeverLoosens: with the operator's opt-in for every tool, an
// allow rule still pre-approves nothing for untrusted code, under an ask
// rule, against a deny rule of another settings file, for CI and agent
// configuration, a high-risk command (waiting, or denied by the policy),
// a secret-looking path, a capability the operator does not list, a
// repository's own policy.yaml opt-in, or a call the rule does not match.
func TestAllowNeverLoosens(t *testing.T) {
	settings := func(files ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(files); i += 2 {
			m[files[i]] = files[i+1]
		}
		return m
	}
	const on = matrixOperatorPolicy + matrixOptIn
	for _, c := range []struct {
		name      string
		settings  map[string]string
		operator  string
		untrusted bool
		tool      string
		args      string
		want      matrixOutcome
		why       string
	}{
		{"untrusted code", settings(".claude/settings.json", `{"permissions":{"allow":["Read(notes.txt)"]}}`), on, true,
			"repo.read", `{"path":"notes.txt"}`, approval, "policy: repo.read always needs approval"},
		{"ask beats allow", settings(".claude/settings.json", `{"permissions":{"allow":["Read"],"ask":["Read(notes.txt)"]}}`), on, false,
			"repo.read", `{"path":"notes.txt"}`, approval, "policy: repo.read always needs approval"},
		{"deny of the local file beats allow", settings(".claude/settings.json", `{"permissions":{"allow":["Read(notes.txt)"]}}`, ".claude/settings.local.json", `{"permissions":{"deny":["Read(notes.txt)"]}}`), on, false,
			"repo.read", `{"path":"notes.txt"}`, refused, "Read(notes.txt)"},
		{"CI configuration", settings(".claude/settings.json", `{"permissions":{"allow":["Edit"]}}`), on, false,
			"repo.write", `{"path":".github/workflows/ci.yml","content":"on: push\n","expected_hash":""}`, approval, "changes CI or agent configuration"},
		{"agent configuration", settings(".claude/settings.json", `{"permissions":{"allow":["Edit(.claude/**)"]}}`), on, false,
			"repo.write", `{"path":".claude/settings.local.json","content":"{}","expected_hash":""}`, approval, "changes CI or agent configuration"},
		{"high-risk command", settings(".claude/settings.json", `{"permissions":{"allow":["Bash(rm:*)"]}}`), on, false,
			"process.run", `{"command":"rm -f src/keep.txt"}`, approval, "policy: process.run always needs approval"},
		{"high-risk command denied by policy", settings(".claude/settings.json", `{"permissions":{"allow":["Bash(rm:*)"]}}`), strings.Replace(on, "risk:\n", "risk:\n  highRiskAction: deny\n", 1), false,
			"process.run", `{"command":"rm -f src/keep.txt"}`, refused, "POLICY_DENIED"},
		{"secret-looking path", settings(".claude/settings.json", `{"permissions":{"allow":["Edit(certs/**)"]}}`), on, false,
			"repo.write", `{"path":"certs/server.pem","content":"x","expected_hash":""}`, approval, "policy: repo.write always needs approval"},
		{"capability the operator does not list", settings(".claude/settings.json", `{"permissions":{"allow":["Read(notes.txt)"]}}`), matrixOperatorPolicy + "claudeCode:\n  honorAllow: [test.run, mcp.other.*]\n", false,
			"repo.read", `{"path":"notes.txt"}`, approval, "policy: repo.read always needs approval"},
		{"MCP server the operator does not list", settings(".claude/settings.json", `{"permissions":{"allow":["mcp__docs"]}}`), matrixOperatorPolicy + "claudeCode:\n  honorAllow: [mcp.other.*]\n", false,
			"mcp.docs.lookup", `{}`, approval, "policy: mcp.docs.lookup always needs approval"},
		{"the repository's own policy.yaml opts in", settings(".claude/settings.json", `{"permissions":{"allow":["Read(notes.txt)"]}}`, ".agent/policy.yaml", matrixOptIn), matrixOperatorPolicy, false,
			"repo.read", `{"path":"notes.txt"}`, approval, "policy: repo.read always needs approval"},
		{"another path", settings(".claude/settings.json", `{"permissions":{"allow":["Read(notes.txt)"]}}`), on, false,
			"repo.read", `{"path":"src/keep.txt"}`, approval, "policy: repo.read always needs approval"},
		{"another command", settings(".claude/settings.json", `{"permissions":{"allow":["Bash(echo:*)"]}}`), on, false,
			"process.run", `{"command":"ls"}`, approval, "policy: process.run always needs approval"},
		{"a command substitution", settings(".claude/settings.json", `{"permissions":{"allow":["Bash(echo:*)"]}}`), on, false,
			"process.run", `{"command":"echo $(id)"}`, approval, "policy: process.run always needs approval"},
		{"a test command writing a file", settings(".claude/settings.json", `{"permissions":{"allow":["Bash(echo:*)"]}}`, ".agent/config.yaml", "test: echo ok > out.txt\n"), on, false,
			"test.run", `{}`, approval, "policy: test.run always needs approval"},
		{"a search under a Read rule with a path", settings(".claude/settings.json", `{"permissions":{"allow":["Read(notes.txt)"]}}`), on + "  # repo.search too\n", false,
			"repo.search", `{"query":"notes"}`, approval, "policy: repo.search always needs approval"},
	} {
		t.Run(c.name, func(t *testing.T) {
			operator := c.operator
			if c.tool == "repo.search" {
				operator = strings.Replace(operator, "  repo.read: {approval: always}\n", "  repo.read: {approval: always}\n  repo.search: {approval: always}\n", 1)
				operator = strings.Replace(operator, "honorAllow: [", "honorAllow: [repo.search, ", 1)
			}
			o := matrixRepo(t, c.settings, operator)
			o.UntrustedRepo = c.untrusted
			got, why, rec := matrixDispatch(t, o, c.tool, c.args)
			if got != c.want || !strings.Contains(why, c.why) {
				t.Fatalf("%s %s: %s (%s), want %s (%s)", c.tool, c.args, got, why, c.want, c.why)
			}
			if inv := invoked(t, rec); inv != nil {
				t.Errorf("invoked: %v", inv)
			}
		})
	}
}

// TestAllowWarningsFollowPolicy: what the run's log and agentos doctor
// say about allow rules follows the operator's policy: ignored by
// default or for untrusted code, and under an opt-in each rule that
// cannot pre-approve anything.
func TestAllowWarningsFollowPolicy(t *testing.T) {
	rules := map[string]string{".claude/settings.json": `{"permissions":{"allow":["Read(notes.txt)","Bash(echo:*)","WebFetch(domain:example.com)","mcp__docs__lookup(x)","Frobnicate"]}}`}
	for _, c := range []struct {
		name      string
		operator  string
		untrusted bool
		want      []string
	}{
		{"default", matrixOperatorPolicy, false, []string{
			`permissions.allow "Read(notes.txt), Bash(echo:*), WebFetch(domain:example.com), mcp__docs__lookup(x), Frobnicate": 5 allow rule(s) not honoured: a repository's settings only tighten unless the operator's policy.yaml lists capabilities in claudeCode.honorAllow`,
		}},
		{"untrusted", matrixOperatorPolicy + matrixOptIn, true, []string{
			`permissions.allow "Read(notes.txt), Bash(echo:*), WebFetch(domain:example.com), mcp__docs__lookup(x), Frobnicate": 5 allow rule(s) not honoured: the working tree holds untrusted code`,
		}},
		{"opt-in for test.run", matrixOperatorPolicy + "claudeCode:\n  honorAllow: [test.run]\n", false, []string{
			`permissions.allow "WebFetch(domain:example.com)": pre-approves nothing: an argument is matched only for Bash`,
			`permissions.allow "mcp__docs__lookup(x)": pre-approves nothing: an argument is matched only for Bash`,
			`permissions.allow "Frobnicate": pre-approves nothing: not a tool name agentos knows`,
			`permissions.allow "Read(notes.txt)": 1 allow rule(s) pre-approve nothing: the operator's policy.yaml claudeCode.honorAllow lists only test.run`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := matrixRepo(t, rules, c.operator)
			o.UntrustedRepo = c.untrusted
			env, err := setup.Build(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			var got []string
			for _, w := range env.Warnings {
				if w.Setting == "permissions.allow" {
					got = append(got, w.String())
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("allow warnings:\n%s\nwant %d", strings.Join(got, "\n"), len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %d: %s\nwant it to contain %s", i, got[i], w)
				}
			}
		})
	}
}
