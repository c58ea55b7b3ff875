package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/policy"
)

// dispatchApproved runs a call through the kernel and, when the policy
// asks for an approval, executes it as approved: the property is about
// results, and an approval is a maintainer's answer, not an input.
func dispatchApproved(t *testing.T, k *kernel.Kernel, tool, args string) (json.RawMessage, error) {
	t.Helper()
	out, err := k.Dispatch(context.Background(), &memRecorder{}, kernel.Call{ID: "c", Name: tool, Args: json.RawMessage(args)})
	if err != nil || out.Pending == nil {
		return out.Result, err
	}
	p := out.Pending
	out, err = k.ExecuteApproved(context.Background(), &memRecorder{}, kernel.Call{ID: "c", Name: tool, Args: p.Args}, p.ApprovalID, p.Digest, p.Revision)
	return out.Result, err
}

// TestEveryToolResultValid: every built-in tool, given the inputs that
// real models send and real repositories hold — empty results, no
// matches, empty and binary files, output over every limit, unicode and
// invalid UTF-8, commands that are missing or fail — ends in a result that
// validates against the tool's declared output schema (the kernel checks
// each one: a violation is SCHEMA_VIOLATION) or in a structured kernel
// error that is not a schema violation of the result. Under the sandbox
// the suite runs in (bwrap, or Landlock with AGENTOS_SANDBOX=landlock).
func TestEveryToolResultValid(t *testing.T) {
	tl, dir := edgeTree(t)
	for p, c := range map[string]string{
		".agent/config.yaml": "test: seq 1 200000\nlint: head -c 3000 bin.dat\n",
		"bytes.bin":          "\xff\xfe\x00bad \xc3\x28 utf-8\n",
	} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := policy.Default()
	k := kernel.New(p, tl.ws, nil)
	defs := Defs(tl.ws, Options{})
	for _, d := range defs {
		if err := k.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	hashOf := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return ""
		}
		return Sha256Hex(b)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	huge := strings.Repeat("日本語 ✓ line\n", 200000) // ~3.6 MB
	calls := []struct{ tool, args string }{
		{"echo", `{"text":""}`},
		{"echo", `{"text":` + q(strings.Repeat("✓", 100000)) + `}`},
		{"repo.read", `{"path":"bytes.bin"}`},
		{"repo.read", `{"path":"empty.txt","range":[1,1]}`},
		{"repo.read", `{"path":"no/such/file.go"}`},
		{"repo.search", `{"query":"nothing-matches-this-zzz"}`},
		{"repo.search", `{"query":"\\xff","regex":true}`},
		{"repo.search", `{"query":"(unclosed","regex":true}`},
		{"repo.search", `{"query":"bad","globs":["**/*.bin"]}`},
		// writes: new, empty, unicode, binary, huge, stale hash, into .git
		{"repo.write", `{"path":"new/dir/a.txt","content":"","expected_hash":""}`},
		{"repo.write", `{"path":"uni.txt","content":` + q(strings.Repeat("héllo ✓ 日本語\n", 50)) + `,"expected_hash":""}`},
		{"repo.write", `{"path":"nul.bin","content":"a\u0000b","expected_hash":""}`},
		{"repo.write", `{"path":"huge.txt","content":` + q(huge) + `,"expected_hash":""}`},
		{"repo.write", `{"path":"crlf.txt","content":"x","expected_hash":"` + strings.Repeat("0", 64) + `"}`},
		{"repo.write", `{"path":"crlf.txt","content":"x","expected_hash":""}`},
		{"repo.write", `{"path":".git/config","content":"x","expected_hash":""}`},
		{"repo.write", `{"path":"../outside.txt","content":"x","expected_hash":""}`},
		// patches: add, delete, to an empty file, one that does not apply, not a diff
		{"repo.patch", `{"unifiedDiff":"--- /dev/null\n+++ b/added.txt\n@@ -0,0 +1,2 @@\n+one\n+✓ two\n"}`},
		{"repo.patch", `{"unifiedDiff":"--- a/dir/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-CheckToken\n"}`},
		{"repo.patch", `{"unifiedDiff":"--- a/empty.txt\n+++ b/empty.txt\n@@ -0,0 +1 @@\n+now something\n"}`},
		{"repo.patch", `{"unifiedDiff":"--- a/crlf.txt\n+++ b/crlf.txt\n@@ -1 +1 @@\n-not there\n+x\n"}`},
		{"repo.patch", `{"unifiedDiff":"this is prose, not a diff"}`},
		// commands: no output, failing, missing, huge, binary, invalid UTF-8
		{"process.run", `{"command":"true"}`},
		{"process.run", `{"command":"false"}`},
		{"process.run", `{"command":"no-such-program-zzz"}`},
		{"process.run", `{"command":"seq 1 300000"}`},
		{"process.run", `{"command":"cat bin.dat bytes.bin"}`},
		{"process.run", `{"command":"cat unicode.txt"}`},
		{"process.run", `{"command":"ls","cwd":"no/such/dir"}`},
		{"process.run", `{"command":"sh -c 'echo hi'"}`},
		{"test.run", `{}`},
		{"test.run", `{"name":"x"}`},
		{"lint.run", `{}`},
	}
	if len(calls) == 0 {
		t.Fatal("no calls")
	}
	seen := map[string]bool{}
	for _, c := range calls {
		seen[c.tool] = true
		raw, err := dispatchApproved(t, k, c.tool, c.args)
		var ke *kernel.Error
		switch {
		case err == nil:
			if !json.Valid(raw) || !utf8.Valid(raw) {
				t.Errorf("%s %.80s: the result is not valid UTF-8 JSON", c.tool, c.args)
			}
		case !errors.As(err, &ke):
			t.Errorf("%s %.80s: unstructured error %v", c.tool, c.args, err)
		case ke.Code == kernel.CodeSchemaViolation && ke.Kind != "guard":
			t.Errorf("%s %.80s: the result fails the tool's own schema: %v", c.tool, c.args, err)
		}
	}
	for _, d := range defs {
		if !seen[d.Name] {
			t.Errorf("tool %s has no edge inputs here", d.Name)
		}
	}
	// A write over the size limit is refused whole, never cut.
	if h := hashOf("huge.txt"); h != "" && h != Sha256Hex([]byte(huge)) {
		t.Errorf("huge.txt was written partly")
	}
}

// TestWriteReadRoundTripProperty: for random content (unicode, CRLF, NUL
// bytes, invalid UTF-8 escaped by JSON, long lines), repo.write then
// repo.read gives back the bytes written when they fit the output limit,
// with the hash the write returned; the next write with that hash
// succeeds and one with the old hash is a conflict, never a silent
// overwrite.
func TestWriteReadRoundTripProperty(t *testing.T) {
	tl, _ := tree(t, map[string]string{"seed.txt": "x\n"})
	p := policy.Default()
	k := kernel.New(p, tl.ws, nil)
	for _, d := range Defs(tl.ws, Options{}) {
		if err := k.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewSource(7))
	pieces := []string{"a", "é", "日本", "✓", " ", "\n", "\r\n", "\t", "\x00", strings.Repeat("z", 300), "\"", "\\"}
	prev := ""
	for i := 0; i < 60; i++ {
		var b strings.Builder
		for n := rng.Intn(40); n > 0; n-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		content := b.String()
		cj, _ := json.Marshal(content)
		raw, err := dispatchApproved(t, k, "repo.write", fmt.Sprintf(`{"path":"f.txt","content":%s,"expected_hash":%q}`, cj, prev))
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		var w struct{ Hash string }
		json.Unmarshal(raw, &w)
		if w.Hash != Sha256Hex([]byte(content)) {
			t.Fatalf("write %d: hash %s, want the content's", i, w.Hash)
		}
		raw, err = dispatchApproved(t, k, "repo.read", `{"path":"f.txt"}`)
		if strings.Contains(content, "\x00") {
			// A NUL makes it binary: read refuses it, structured.
			if code(err) != kernel.CodeToolRuntimeError {
				t.Fatalf("read %d of a binary file: %v", i, err)
			}
			prev = w.Hash
			continue
		}
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		var r struct {
			Content   string
			SHA256    string `json:"sha256"`
			Truncated bool
		}
		json.Unmarshal(raw, &r)
		if r.SHA256 != w.Hash || (!r.Truncated && r.Content != content) {
			t.Fatalf("read %d: got %q (sha %s), wrote %q", i, r.Content, r.SHA256, content)
		}
		if prev != "" && prev != w.Hash {
			_, err := dispatchApproved(t, k, "repo.write", fmt.Sprintf(`{"path":"f.txt","content":"lost","expected_hash":%q}`, prev))
			if err == nil || code(err) == kernel.CodeSchemaViolation {
				t.Fatalf("write %d with a stale hash: %v, want a conflict", i, err)
			}
			if cur, _ := os.ReadFile(filepath.Join(tl.ws.Root(), "f.txt")); !bytes.Equal(cur, []byte(content)) {
				t.Fatalf("a stale write changed the file")
			}
		}
		prev = w.Hash
	}
}
