package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentos/agentos/kernel/sandbox/sandboxtest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/workspace"

	"github.com/agentos/agentos/kernel/testenv"
)

func tree(t testing.TB, files map[string]string) (*tools, string) {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.Open(dir, workspace.Options{Sandbox: sandboxtest.Sandbox(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &tools{ws: ws}, dir
}

var env = kernel.Env{Limits: kernel.Limits{MaxStdout: 2000}, Redact: func(s string) string { return s }}

func call(t *testing.T, d kernel.ToolDef, args string) (map[string]any, error) {
	t.Helper()
	res, err := d.Handler(context.Background(), env, json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(res)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m, nil
}

func TestSearch(t *testing.T) {
	tl, _ := tree(t, map[string]string{
		"a.go":          "package a\nfunc CheckToken() {}\n",
		"b/b.go":        "package b\n// CheckToken is called here\n",
		"b/b_test.go":   "package b\nfunc TestCheckToken(t *T) {}\n",
		"ignored/x.go":  "CheckToken\n",
		".gitignore":    "ignored/\n*.log\n",
		"debug.log":     "CheckToken\n",
		"bin/tool":      "CheckToken\x00\x01binary",
		".git/HEAD":     "CheckToken",
		"notes/big.txt": strings.Repeat("CheckToken line\n", 50),
	})
	d := tl.search()
	m, err := call(t, d, `{"query":"CheckToken"}`)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, x := range m["matches"].([]any) {
		mm := x.(map[string]any)
		if !strings.HasPrefix(mm["path"].(string), "notes/") {
			paths = append(paths, fmt.Sprintf("%s:%v", mm["path"], mm["line"]))
		}
	}
	if got := strings.Join(paths, " "); got != "a.go:2 b/b.go:2 b/b_test.go:2" {
		t.Errorf("matches %s (must skip .gitignore'd, binary and .git files)", got)
	}
	m, _ = call(t, d, `{"query":"func \\w+Token","regex":true,"globs":["**/*.go","!**/*_test.go"]}`)
	if n := len(m["matches"].([]any)); n != 1 {
		t.Errorf("regex+globs: %d matches", n)
	}
	m, _ = call(t, d, `{"query":"CheckToken","max_results":5}`)
	if len(m["matches"].([]any)) != 5 || m["truncated"] != true {
		t.Errorf("bounded: %v", m["truncated"])
	}
	if _, err := d.Assess(context.Background(), env, json.RawMessage(`{"query":"(","regex":true}`)); err == nil {
		t.Error("invalid regexp accepted")
	}
}

func TestPatchAllOrNothing(t *testing.T) {
	tl, dir := tree(t, map[string]string{"a.txt": "one\ntwo\n", "b.txt": "x\ny\n"})
	d := tl.patchTool()
	diff := "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n x\n-nope\n+Y\n"
	args, _ := json.Marshal(map[string]string{"unifiedDiff": diff})
	if _, err := call(t, d, string(args)); err == nil {
		t.Fatal("a patch with a bad second file applied")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\ntwo\n" {
		t.Fatalf("a.txt changed although the patch failed: %q", b)
	}
	good := "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\ndiff --git a/c.txt b/c.txt\nnew file mode 100644\n--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+new\ndiff --git a/b.txt b/d.txt\nrename from b.txt\nrename to d.txt\n"
	args, _ = json.Marshal(map[string]string{"unifiedDiff": good})
	m, err := call(t, d, string(args))
	if err != nil {
		t.Fatal(err)
	}
	if m["lines_added"].(float64) != 2 {
		t.Errorf("result %v", m)
	}
	for p, want := range map[string]string{"a.txt": "one\nTWO\n", "c.txt": "new\n", "d.txt": "x\ny\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, p)); string(b) != want {
			t.Errorf("%s = %q", p, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err == nil {
		t.Error("rename left the old file")
	}
	// path must cover every file of the diff
	args, _ = json.Marshal(map[string]string{"path": "a.txt", "unifiedDiff": "--- a/c.txt\n+++ b/c.txt\n@@ -1 +1 @@\n-new\n+old\n"})
	var ke *kernel.Error
	if _, err := call(t, d, string(args)); !errors.As(err, &ke) || ke.Code != kernel.CodeInvalidArguments {
		t.Errorf("path mismatch: %v", err)
	}
}

func TestTestAndLintDetection(t *testing.T) {
	cases := []struct {
		files      map[string]string
		test, lint string
	}{
		{map[string]string{"go.mod": "module x\n"}, "go test -count=1 ./...", "go vet ./..."},
		{map[string]string{"package.json": "{}"}, "npm test", "npm run lint"},
		{map[string]string{"pyproject.toml": ""}, "python -m pytest", "python -m ruff check ."},
		{map[string]string{"go.mod": "module x\n", ".agent/config.yaml": "test: make check\nlint: make lint\n"}, "make check", "make lint"},
	}
	for _, c := range cases {
		tl, _ := tree(t, c.files)
		if got, err := tl.testCommand(""); err != nil || got != c.test {
			t.Errorf("%v: test %q %v", c.files, got, err)
		}
		if got, err := tl.lintCommand(); err != nil || got != c.lint {
			t.Errorf("%v: lint %q %v", c.files, got, err)
		}
	}
	tl, _ := tree(t, map[string]string{"go.mod": "module x\n"})
	if _, err := tl.testCommand("x; rm -rf /"); err == nil {
		t.Error("a test name with shell syntax was accepted")
	}
	tl, _ = tree(t, map[string]string{"README": "nothing to run"})
	if _, err := tl.testCommand(""); err == nil {
		t.Error("no test command, no error")
	}
	tl, _ = tree(t, map[string]string{".agent/config.yaml": "tests: x\n"})
	if _, err := tl.testCommand(""); err == nil {
		t.Error("unknown config key accepted")
	}
}

func TestTestRunReportsPassFail(t *testing.T) {
	testenv.LookPath(t, "go")
	tl, _ := tree(t, map[string]string{"go.mod": "module x\n\ngo 1.22\n", "x_test.go": "package x\nimport \"testing\"\nfunc TestFail(t *testing.T) { t.Fatal(\"boom\") }\nfunc TestOK(t *testing.T) {}\n"})
	d := tl.test()
	m, err := call(t, d, `{}`)
	if err != nil || m["passed"] != false || !strings.Contains(m["stdout"].(string), "boom") {
		t.Fatalf("%v %v", m, err)
	}
	m, err = call(t, d, `{"name":"TestOK"}`)
	if err != nil || m["passed"] != true {
		t.Fatalf("%v %v", m, err)
	}
}

// BenchmarkSearch compares repo.search with ripgrep on a generated tree of
// 50,000 files (set AGENTOS_BENCH_FILES to change it).
func BenchmarkSearch(b *testing.B) {
	n := 50000
	if v := os.Getenv("AGENTOS_BENCH_FILES"); v != "" {
		fmt.Sscan(v, &n)
	}
	files := map[string]string{}
	for i := 0; i < n; i++ {
		content := fmt.Sprintf("package p%d\n\n// file %d of the benchmark tree\nfunc F%d() int { return %d }\n", i%100, i, i, i)
		if i%997 == 0 {
			content += "// needle: CheckTokenPrefix\n"
		}
		files[fmt.Sprintf("d%03d/s%02d/f%05d.go", i%500, i%7, i)] = content
	}
	tl, dir := tree(b, files)
	q := Query{Literal: []byte("CheckTokenPrefix"), Max: 1000}
	b.Run("agentos", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			m, _, _, err := tl.Search(context.Background(), q)
			if err != nil || len(m) != (n+996)/997 {
				b.Fatal(err, len(m))
			}
		}
	})
	rg, err := exec.LookPath("rg")
	if err != nil {
		b.Log("RIPGREP NOT INSTALLED: skipping the rg baseline (apt-get install ripgrep)")
		return
	}
	b.Run("rg", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cmd := exec.Command(rg, "-n", "--no-messages", "-F", "CheckTokenPrefix", ".")
			cmd.Dir = dir
			if out, err := cmd.Output(); err != nil || strings.Count(string(out), "\n") != (n+996)/997 {
				b.Fatal(err)
			}
		}
	})
}

// TestDetectedPythonInterpreter: a detected Python command names python3
// where the commands' PATH has no python (plain Debian), python where it
// has one.
func TestDetectedPythonInterpreter(t *testing.T) {
	bin := t.TempDir()
	tl, _ := tree(t, map[string]string{"pyproject.toml": "[project]\nname='x'\n"})
	exe := func(name string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin)
	exe("python3")
	if c, err := tl.testCommand(""); err != nil || c != "python3 -m pytest" {
		t.Errorf("only python3: %q %v", c, err)
	}
	exe("python")
	if c, err := tl.testCommand("k"); err != nil || c != "python -m pytest -k k" {
		t.Errorf("python too: %q %v", c, err)
	}
}
