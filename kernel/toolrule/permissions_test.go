package toolrule

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// resolveForTest maps the bare names the tests use as runtime/claudecode
// does.
func resolveForTest(name string) ([]string, bool) {
	switch name {
	case "Grep", "Glob":
		return []string{"repo.search"}, true
	case "WebFetch", "Task":
		return nil, true
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		server, tool, found := strings.Cut(rest, "__")
		if !found {
			tool = "*"
		}
		return []string{"mcp." + server + "." + tool}, true
	}
	return nil, false
}

func args(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestPermissionsDeny(t *testing.T) {
	p, problems := NewPermissions(".claude/settings.json",
		[]string{"Read(calc.py)", "Bash(rm:*)", "Edit(.github/**)", "mcp__db__drop_*", "Grep", "WebFetch"}, nil, resolveForTest)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	cases := []struct {
		tool string
		args any
		rule string // "" = not refused
	}{
		{"repo.read", map[string]any{"path": "calc.py"}, "Read(calc.py)"},
		{"repo.read", map[string]any{"path": "lib/calc.py"}, "Read(calc.py)"},
		{"repo.read", map[string]any{"path": "calc.pyc"}, ""},
		{"process.run", map[string]any{"command": "rm -rf build"}, "Bash(rm:*)"},
		{"process.run", map[string]any{"command": "go test ./... && rm x"}, "Bash(rm:*)"},
		{"process.run", map[string]any{"command": "rmdir x"}, ""},
		{"process.run", map[string]any{"command": "go test ./..."}, ""},
		{"repo.search", map[string]any{"query": "x"}, "Grep"},
		{"mcp.db.drop_table", map[string]any{}, "mcp__db__drop_*"},
		{"mcp.db.select", map[string]any{}, ""},
	}
	for _, c := range cases {
		r := p.Denied(c.tool, args(t, c.args))
		got := ""
		if r != nil {
			got = r.Rule
		}
		if got != c.rule {
			t.Errorf("Denied(%s %v) = %q (%v), want %q", c.tool, c.args, got, r, c.rule)
		}
	}
	if r := p.DeniedWrite("repo.patch", []string{"src/a.go", ".github/workflows/ci.yml"}); r == nil || r.Rule != "Edit(.github/**)" || !strings.Contains(r.Error(), ".claude/settings.json permissions.deny rule Edit(.github/**)") {
		t.Errorf("DeniedWrite = %v", r)
	}
	if r := p.DeniedWrite("repo.write", []string{"src/a.go"}); r != nil {
		t.Errorf("DeniedWrite(src/a.go) = %v", r)
	}
	// A command the deny rules cannot be checked against is not refused:
	// it waits for a maintainer.
	sub := args(t, map[string]any{"command": "echo $(cat x)"})
	if r := p.Denied("process.run", sub); r != nil {
		t.Errorf("unverifiable command refused: %v", r)
	}
	if why := p.Ask("process.run", sub, "", nil); !strings.Contains(why, "cannot be checked") {
		t.Errorf("Ask(unverifiable) = %q", why)
	}
	if why := p.Ask("process.run", args(t, map[string]any{"command": "go test ./..."}), "", nil); why != "" {
		t.Errorf("Ask(go test) = %q", why)
	}
	// test.run's command comes from the repository's configuration: it is
	// checked once assessed.
	if r := p.DeniedCommand("test.run", "rm -f out"); r == nil || r.Rule != "Bash(rm:*)" {
		t.Errorf("DeniedCommand(test.run rm) = %v", r)
	}
	if r := p.Denied("test.run", args(t, map[string]any{"name": "TestX"})); r != nil {
		t.Errorf("Denied(test.run args) = %v", r)
	}
	if why := p.Ask("test.run", args(t, map[string]any{}), "go test ./...", nil); why != "" {
		t.Errorf("Ask(test.run go test) = %q", why)
	}
	if got, want := p.DenyGlobs(), []string{"**/calc.py", "**/calc.py/**"}; !slices.Equal(got, want) {
		t.Errorf("DenyGlobs = %v, want %v", got, want)
	}
}

func TestPermissionsAsk(t *testing.T) {
	p, problems := NewPermissions(".claude/settings.local.json", nil, []string{"Bash(git push:*)", "Edit(docs/**)", "mcp__github", "Read(secrets/**)"}, resolveForTest)
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	cases := []struct {
		tool  string
		args  any
		paths []string
		ask   bool
	}{
		{"process.run", map[string]any{"command": "git push origin main"}, nil, true},
		{"process.run", map[string]any{"command": "git status"}, nil, false},
		{"repo.patch", map[string]any{}, []string{"docs/a.md"}, true},
		{"repo.patch", map[string]any{}, []string{"src/a.go"}, false},
		{"mcp.github.create_issue", map[string]any{}, nil, true},
		{"repo.read", map[string]any{"path": "secrets/key"}, nil, true},
		{"repo.read", map[string]any{"path": "README.md"}, nil, false},
		// repo.search may read what an ask rule covers.
		{"repo.search", map[string]any{"query": "x"}, nil, true},
	}
	for _, c := range cases {
		if p.Denied(c.tool, args(t, c.args)) != nil {
			t.Errorf("%s denied by ask rules", c.tool)
		}
		why := p.Ask(c.tool, args(t, c.args), "", c.paths)
		if (why != "") != c.ask {
			t.Errorf("Ask(%s %v %v) = %q, want ask %v", c.tool, c.args, c.paths, why, c.ask)
		}
		if c.ask && !strings.Contains(why, ".claude/settings.local.json permissions.ask") {
			t.Errorf("Ask reason %q does not name the file", why)
		}
	}
}

func TestPermissionsProblems(t *testing.T) {
	_, problems := NewPermissions("s.json", []string{"WebFetch(domain:example.com)", "Read(//etc/passwd)", "Frobnicate", "Bash(", "Bash(npm:* test)", "Grep(src)"}, []string{"Read(~/.ssh/**)"}, resolveForTest)
	got := map[string]string{}
	for _, p := range problems {
		got[p.Rule] = p.List + ": " + p.Reason
	}
	for rule, want := range map[string]string{
		"WebFetch(domain:example.com)": "network.allow",
		"Read(//etc/passwd)":           "outside the repository",
		"Frobnicate":                   "not a tool name",
		"Bash(":                        "not a rule",
		"Bash(npm:* test)":             ":*",
		"Grep(src)":                    "by its name alone",
		"Read(~/.ssh/**)":              "ask: ",
	} {
		if !strings.Contains(got[rule], want) {
			t.Errorf("problem for %q = %q, want it to contain %q", rule, got[rule], want)
		}
	}
	if len(problems) != 7 {
		t.Errorf("%d problems, want 7: %v", len(problems), problems)
	}
}
