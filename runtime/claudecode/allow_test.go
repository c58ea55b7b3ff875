package claudecode

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
)

// TestAllowRuleMatches: which calls each kind of allow rule matches, as
// the kernel hands them over (arguments, and the assessed command and
// paths).
func TestAllowRuleMatches(t *testing.T) {
	type call struct {
		tool, args, command string
		paths               []string
	}
	for _, c := range []struct {
		rule string
		yes  []call
		no   []call
	}{
		{"Bash(npm test:*)",
			[]call{{tool: "process.run", args: `{"command":"npm test -- -u"}`}, {tool: "test.run", command: "npm test"}},
			[]call{{tool: "process.run", args: `{"command":"npm install"}`}, {tool: "process.run", args: `{"command":"npm test $(id)"}`}, {tool: "test.run", command: ""}, {tool: "lint.run", command: "npm run lint"}, {tool: "repo.read", args: `{"path":"x"}`}}},
		{"Bash",
			[]call{{tool: "process.run", args: `{"command":"anything"}`}, {tool: "lint.run", command: "make lint"}, {tool: "test.run"}},
			[]call{{tool: "repo.write", paths: []string{"a"}}}},
		{"Read(docs/**)",
			[]call{{tool: "repo.read", args: `{"path":"docs/a/b.md"}`}},
			[]call{{tool: "repo.read", args: `{"path":"src/a.go"}`}, {tool: "repo.read", args: `{"path":"docs/../src/a.go"}`}, {tool: "repo.search", args: `{"query":"x"}`}}},
		{"Read",
			[]call{{tool: "repo.read", args: `{"path":"any"}`}, {tool: "repo.search", args: `{"query":"x"}`}},
			[]call{{tool: "process.run", args: `{"command":"cat any"}`}}},
		{"Write(src/**)",
			[]call{{tool: "repo.patch", paths: []string{"src/a.go", "src/b/c.go"}}, {tool: "repo.write", paths: []string{"src/a.go"}}},
			[]call{{tool: "repo.patch", paths: []string{"src/a.go", "README.md"}}, {tool: "repo.write", paths: nil}}},
		{"Edit",
			[]call{{tool: "repo.write", paths: []string{"any"}}},
			[]call{{tool: "repo.write", paths: nil}}},
		{"Grep",
			[]call{{tool: "repo.search", args: `{"query":"x"}`}},
			[]call{{tool: "repo.read", args: `{"path":"x"}`}}},
		{"mcp__docs",
			[]call{{tool: "mcp.docs.lookup"}, {tool: "mcp.docs.get"}},
			[]call{{tool: "mcp.other.lookup"}, {tool: "mcp.docsx.lookup"}}},
		{"mcp__docs__get_*",
			[]call{{tool: "mcp.docs.get_page"}},
			[]call{{tool: "mcp.docs.lookup"}}},
	} {
		r, problem := parseAllow(".claude/settings.json", c.rule)
		if problem != "" {
			t.Fatalf("%s: %s", c.rule, problem)
		}
		for _, want := range []bool{true, false} {
			calls := c.yes
			if !want {
				calls = c.no
			}
			for _, x := range calls {
				args := json.RawMessage(x.args)
				if x.args == "" {
					args = json.RawMessage(`{}`)
				}
				if got := r.Matches(x.tool, args, kernel.Risk{Tool: x.tool, Command: x.command, Paths: x.paths}); got != want {
					t.Errorf("%s matches %s %s %q %v: %v, want %v", c.rule, x.tool, x.args, x.command, x.paths, got, want)
				}
			}
		}
	}
}

// TestAllowRuleProblems: an allow rule agentos cannot match says why.
func TestAllowRuleProblems(t *testing.T) {
	for rule, want := range map[string]string{
		"WebFetch(domain:example.com)": "an argument is matched only for Bash",
		"Read(//etc/**)":               "outside",
		"Frobnicate":                   "not a tool name agentos knows",
		"Bash()":                       "an empty argument",
		"Bash(ls":                      "not a rule",
		"WebSearch":                    "agentos has no such tool",
	} {
		if _, problem := parseAllow("f", rule); !strings.Contains(problem, want) {
			t.Errorf("%s: %q, want it to say %q", rule, problem, want)
		}
	}
}

// TestPreapprover: nothing without the operator's list or for untrusted
// code; with it, the first matching rule of the listed capability,
// recorded with its file and the policy entry.
func TestPreapprover(t *testing.T) {
	read := func(f string) ([]byte, error) {
		switch f {
		case ".claude/settings.json":
			return []byte(`{"permissions":{"allow":["Bash(go test:*)","mcp__docs"]}}`), nil
		case ".claude/settings.local.json":
			return []byte(`{"permissions":{"allow":["Bash"]}}`), nil
		}
		return nil, fs.ErrNotExist
	}
	p, err := ReadPermissions(read)
	if err != nil {
		t.Fatal(err)
	}
	if p.Preapprover() != nil {
		t.Fatal("a pre-approver without the operator's opt-in")
	}
	honors := func(list ...string) Honour {
		return Honour{HonorAllow: list, HonorsAllow: func(c string) (string, bool) {
			for _, e := range list {
				if coversName(e, c) {
					return e, true
				}
			}
			return "", false
		}}
	}
	h := honors("test.run", "mcp.docs.*")
	h.Untrusted = true
	p.Under(h)
	if p.Preapprover() != nil {
		t.Fatal("a pre-approver for untrusted code")
	}
	p.Under(honors("test.run", "mcp.docs.*"))
	pre := p.Preapprover()
	for _, c := range []struct {
		tool, command, want string
	}{
		{"test.run", "go test ./...", `{"rule":"Bash(go test:*)","source":".claude/settings.json permissions.allow","policy":"claudeCode.honorAllow test.run"}`},
		{"test.run", "make test", `{"rule":"Bash","source":".claude/settings.local.json permissions.allow","policy":"claudeCode.honorAllow test.run"}`},
		{"mcp.docs.lookup", "", `{"rule":"mcp__docs","source":".claude/settings.json permissions.allow","policy":"claudeCode.honorAllow mcp.docs.*"}`},
		{"process.run", "go test ./...", "null"},
		{"lint.run", "go vet ./...", "null"},
	} {
		args := json.RawMessage(`{}`)
		if c.tool == "process.run" {
			args = json.RawMessage(`{"command":"go test ./..."}`)
		}
		b, _ := json.Marshal(pre(c.tool, args, kernel.Risk{Tool: c.tool, Command: c.command}))
		if string(b) != c.want {
			t.Errorf("%s %q: %s, want %s", c.tool, c.command, b, c.want)
		}
	}
}
