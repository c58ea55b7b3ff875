package claudecode

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestOurs(t *testing.T) {
	cases := []struct {
		name string
		want []string
		ok   bool
	}{
		{"Bash", []string{"process.run"}, true},
		{"Bash(git add:*)", []string{"process.run"}, true},
		{"Read", []string{"repo.read"}, true},
		{"Edit", []string{"repo.patch", "repo.write"}, true},
		{"MultiEdit", []string{"repo.patch", "repo.write"}, true},
		{"Write", []string{"repo.write", "repo.patch"}, true},
		{"Grep", []string{"repo.search"}, true},
		{"Glob", []string{"repo.search"}, true},
		{"mcp__memory__create_entities", []string{"mcp.memory.create_entities"}, true},
		{"mcp__memory", []string{"mcp.memory.*"}, true},
		{"mcp__memory__*", []string{"mcp.memory.*"}, true},
		{"mcp__", nil, false},
		{"mcp____x", nil, false},
		{"WebFetch", nil, false},
		{"repo.read", nil, false},
	}
	for _, c := range cases {
		got, ok := Ours(c.name)
		if ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Ours(%q) = %v, %v; want %v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

func TestAliases(t *testing.T) {
	cases := map[string][]string{
		"process.run":        {"Bash"},
		"repo.patch":         {"Edit", "MultiEdit", "Write"},
		"repo.search":        {"Grep", "Glob"},
		"mcp.everything.add": {"mcp__everything__add"},
		"test.run":           nil,
	}
	for ours, want := range cases {
		if got := Aliases(ours); !reflect.DeepEqual(got, want) {
			t.Errorf("Aliases(%q) = %v, want %v", ours, got, want)
		}
	}
}

func TestMatches(t *testing.T) {
	re := func(m string) *regexp.Regexp {
		if IsNameList(m) || m == "" || m == "*" {
			return nil
		}
		return regexp.MustCompile(m)
	}
	cases := []struct {
		matcher, tool string
		want          bool
	}{
		{"Bash", "process.run", true},
		{"Bash", "test.run", false},
		{"Edit|Write", "repo.patch", true},
		{"Edit|Write", "repo.write", true},
		{"Edit|Write", "repo.read", false},
		{"Read", "repo.read", true},
		{"Grep|Glob", "repo.search", true},
		{"Notebook.*", "repo.patch", false},
		{"mcp__memory__.*", "mcp.memory.create_entities", true},
		{"mcp__memory__.*", "mcp.other.create_entities", false},
		{"mcp__.*", "mcp.everything.echo", true},
		{"mcp__everything__echo", "mcp.everything.echo", true},
		{"mcp\\.everything\\..*", "mcp.everything.echo", true},
		{"process.run", "process.run", true},
		{"bash", "process.run", false}, // case-sensitive, as in Claude Code
	}
	for _, c := range cases {
		if got := Matches(c.matcher, re(c.matcher), c.tool); got != c.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", c.matcher, c.tool, got, c.want)
		}
	}
	if got := Selected("WebFetch|Task", nil, []string{"repo.read", "process.run"}); len(got) != 0 {
		t.Errorf("WebFetch|Task selected %v", got)
	}
}

func TestAllowedTools(t *testing.T) {
	tools, unknown := AllowedTools([]string{"Read", "Bash(npm test:*)", "Edit", "repo.search", "mcp__memory__read_graph", "WebFetch", "Write"})
	want := []string{"repo.read", "process.run", "repo.patch", "repo.write", "repo.search", "mcp.memory.read_graph", "WebFetch"}
	if !reflect.DeepEqual(tools, want) {
		t.Errorf("tools %v, want %v", tools, want)
	}
	if !reflect.DeepEqual(unknown, []string{"WebFetch"}) {
		t.Errorf("unknown %v", unknown)
	}
}

func decode(t *testing.T, b json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestToolInputs(t *testing.T) {
	root := "/work/repo"
	names := map[string]string{"process.run": "Bash", "repo.read": "Read", "repo.write": "Write", "repo.search": "Grep", "repo.patch": "Edit", "mcp.memory.read_graph": "mcp__memory__read_graph"}
	one := func(tool, args string) map[string]any {
		t.Helper()
		in, _, err := ToolInputs(root, tool, json.RawMessage(args))
		if err != nil || len(in) != 1 {
			t.Fatalf("%s: %d inputs, %v", tool, len(in), err)
		}
		if in[0].Name != names[tool] {
			t.Errorf("%s shown as %q, want %q", tool, in[0].Name, names[tool])
		}
		return decode(t, in[0].Input)
	}
	if m := one("process.run", `{"command":"rm -rf /","cwd":"sub"}`); m["command"] != "rm -rf /" || m["cwd"] != "sub" {
		t.Errorf("Bash: %v", m)
	}
	if m := one("repo.read", `{"path":"a/b.go","range":[3,7]}`); m["file_path"] != "/work/repo/a/b.go" || m["offset"] != 3.0 || m["limit"] != 5.0 || m["path"] != "a/b.go" {
		t.Errorf("Read: %v", m)
	}
	if m := one("repo.write", `{"path":"x.txt","content":"hi","expected_hash":""}`); m["file_path"] != "/work/repo/x.txt" || m["content"] != "hi" {
		t.Errorf("Write: %v", m)
	}
	if m := one("repo.search", `{"query":"a.b","globs":["*.go","*.md"]}`); m["pattern"] != `a\.b` || m["glob"] != "{*.go,*.md}" || m["path"] != root || m["query"] != "a.b" {
		t.Errorf("Grep: %v", m)
	}
	if m := one("mcp.memory.read_graph", `{"x":1}`); len(m) != 1 {
		t.Errorf("MCP input changed: %v", m)
	}
	diff := "--- a/auth.go\n+++ b/auth.go\n@@ -1,2 +1,2 @@\n package auth\n-var x = 1\n+var x = 2\n"
	m := one("repo.patch", `{"unifiedDiff":`+string(must(json.Marshal(diff)))+`}`)
	if m["file_path"] != "/work/repo/auth.go" || m["old_string"] != "package auth\nvar x = 1" || m["new_string"] != "package auth\nvar x = 2" {
		t.Errorf("Edit: %v", m)
	}
	if edits, _ := m["edits"].([]any); len(edits) != 1 {
		t.Errorf("MultiEdit edits: %v", m["edits"])
	}
	multi := diff + "--- /dev/null\n+++ b/.claude/hooks/guard.sh\n@@ -0,0 +1,1 @@\n+exit 0\n"
	ins, added, err := ToolInputs(root, "repo.patch", json.RawMessage(`{"unifiedDiff":`+string(must(json.Marshal(multi)))+`}`))
	if err != nil || len(ins) != 2 {
		t.Fatalf("multi-file patch: %d inputs, %v", len(ins), err)
	}
	if m := decode(t, ins[1].Input); m["file_path"] != "/work/repo/.claude/hooks/guard.sh" || m["content"] != "exit 0\n" || ins[1].Name != "Write" {
		t.Errorf("new file: %s %v", ins[1].Name, m)
	}
	if in, _, _ := ToolInputs(root, "test.run", json.RawMessage(`{}`)); len(in) != 1 || in[0].Name != "" {
		t.Errorf("test.run: %+v", in)
	}
	if strings.Join(added, ",") != "content,edits,file_path,new_string,old_string" {
		t.Errorf("added %v", added)
	}
	if _, _, err := ToolInputs(root, "repo.patch", json.RawMessage(`{"unifiedDiff":"@@ nonsense"}`)); err == nil {
		t.Error("an unreadable diff must not reach a hook without its file paths")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestOfServer(t *testing.T) {
	servers := []string{"memory"}
	for name, want := range map[string]bool{
		"mcp__memory__create_entities": true, "mcp__memory__.*": true, "mcp__memory": true, "mcp.memory.read_graph": true, "mcp.memory.*": true,
		"mcp__memoryx__a": false, "mcp.memoryx.a": false, "mcp__fs__read": false, "Bash": false, "memory": false,
	} {
		if got := OfServer(name, servers); got != want {
			t.Errorf("OfServer(%q) = %v, want %v", name, got, want)
		}
	}
	if OfServer("mcp__memory__a", nil) {
		t.Error("no servers mounted, yet a match")
	}
}

func TestSplitList(t *testing.T) {
	got, err := SplitList("Read,Edit\nBash(go test ./...)\r\n , Bash(git add:*, git commit:*),\nmcp__docs__search,,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Read", "Edit", "Bash(go test ./...)", "Bash(git add:*, git commit:*)", "mcp__docs__search"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("SplitList = %q, want %q", got, want)
	}
	for _, bad := range []string{"Bash(go test", "Read)", "Bash(a))"} {
		if _, err := SplitList(bad); err == nil {
			t.Errorf("SplitList(%q): no error", bad)
		}
	}
}

func TestResolveList(t *testing.T) {
	rs, err := ResolveList([]string{"Bash(go test ./...)", "Grep", "mcp__docs__search", "mcp__github", "mcp__fs__*", "mcp.x.y", "test.run", "process.run", "WebFetch"}, []string{"test.run"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, fmt.Sprintf("%s=%s[%s]%v", r.Name, strings.Join(r.Ours, "+"), r.Argument, r.Absent))
	}
	want := "Bash(go test ./...)=process.run[go test ./...]false Grep=repo.search[]false mcp__docs__search=mcp.docs.search[]false mcp__github=mcp.github.*[]false mcp__fs__*=mcp.fs.*[]false mcp.x.y=mcp.x.y[]false test.run=test.run[]false process.run=process.run[]false WebFetch=[]true"
	if strings.Join(got, " ") != want {
		t.Errorf("ResolveList =\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	for _, bad := range []string{"Bsh", "bash", "repo.nuke", "mcp__", "mcp.x", "lint.run(x)", "Read Write"} {
		_, err := ResolveList([]string{"Read", bad}, []string{"lint.run"})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("ResolveList(%q): err = %v, want one naming it", bad, err)
		}
	}
}
