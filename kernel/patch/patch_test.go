package patch

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
)

// corpus: each case is a set of files, a diff, and whether it applies. The
// test runs both Apply and `git apply` and requires the same outcome and
// the same resulting files.
var corpus = []struct {
	name  string
	files map[string]string
	diff  string
	ok    bool
	git   bool // compare with git apply (false where we deliberately differ)
}{
	{"clean", map[string]string{"a.txt": "one\ntwo\nthree\n"}, `--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
`, true, true},
	{"offset", map[string]string{"a.txt": "a\nb\nc\nd\none\ntwo\nthree\nz\n"}, `--- a/a.txt
+++ b/a.txt
@@ -2,3 +2,3 @@
 one
-two
+TWO
 three
`, true, true},
	{"hunk at line 1 must match at the beginning", map[string]string{"a.txt": "x\ny\nz\none\ntwo\nthree\n"}, `--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
`, false, true},
	{"context mismatch", map[string]string{"a.txt": "one\nTWO\nthree\n"}, `--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+2
 three
`, false, true},
	{"multi-file", map[string]string{"a.go": "package a\n\nfunc A() int { return 1 }\n", "b/b.go": "package b\n"}, `diff --git a/a.go b/a.go
--- a/a.go
+++ b/a.go
@@ -1,3 +1,3 @@
 package a
 
-func A() int { return 1 }
+func A() int { return 2 }
diff --git a/b/b.go b/b/b.go
--- a/b/b.go
+++ b/b/b.go
@@ -1 +1,3 @@
 package b
+
+const B = 1
`, true, true},
	{"new file", map[string]string{}, `diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
`, true, true},
	{"delete", map[string]string{"old.txt": "bye\n"}, `diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
`, true, true},
	{"rename", map[string]string{"from.txt": "same\n"}, `diff --git a/from.txt b/to.txt
similarity index 100%
rename from from.txt
rename to to.txt
`, true, true},
	{"no newline at end", map[string]string{"n.txt": "a\nb"}, `--- a/n.txt
+++ b/n.txt
@@ -1,2 +1,2 @@
 a
-b
\ No newline at end of file
+c
\ No newline at end of file
`, true, true},
	{"crlf file, crlf diff", map[string]string{"w.txt": "one\r\ntwo\r\n"}, "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n one\r\n-two\r\n+TWO\r\n", true, true},
	// Deliberate difference: an LF diff against a CRLF file applies here
	// (added lines take CRLF); git apply rejects it.
	{"crlf file, lf diff", map[string]string{"w.txt": "one\r\ntwo\r\n"}, "--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n", true, false},
	{"second hunk mismatch", map[string]string{"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n"}, `--- a/a.txt
+++ b/a.txt
@@ -1,2 +1,2 @@
-1
+one
 2
@@ -7,2 +7,2 @@
 7
-9
+nine
`, false, true},
}

func TestCorpusAgainstGitApply(t *testing.T) {
	testenv.LookPath(t, "git")
	for _, c := range corpus {
		t.Run(c.name, func(t *testing.T) {
			ours, ourErr := applyAll(c.files, c.diff)
			if (ourErr == nil) != c.ok {
				t.Fatalf("Apply error %v, want ok=%v", ourErr, c.ok)
			}
			if ourErr != nil && !errors.As(ourErr, new(*ApplyError)) && !errors.As(ourErr, new(*ParseError)) {
				t.Errorf("untyped error %T", ourErr)
			}
			if !c.git {
				return
			}
			dir := t.TempDir()
			for p, content := range c.files {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
				os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644)
			}
			os.WriteFile(filepath.Join(dir, "p.diff"), []byte(c.diff), 0o644)
			cmd := exec.Command("git", "apply", "--unsafe-paths", "p.diff")
			cmd.Dir = dir
			out, gitErr := cmd.CombinedOutput()
			if (gitErr == nil) != c.ok {
				t.Fatalf("git apply: %v %s, want ok=%v", gitErr, out, c.ok)
			}
			if !c.ok {
				return
			}
			for p, content := range ours {
				b, err := os.ReadFile(filepath.Join(dir, p))
				if content == nil {
					if err == nil {
						t.Errorf("%s: deleted by us, kept by git", p)
					}
					continue
				}
				if string(b) != string(content) {
					t.Errorf("%s: ours %q, git %q", p, content, b)
				}
			}
		})
	}
}

// applyAll applies a diff to an in-memory tree; nil content = deleted.
func applyAll(files map[string]string, diff string) (map[string][]byte, error) {
	fps, err := Parse(diff)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, f := range fps {
		var old []byte
		if f.Op != Create {
			s, ok := files[f.OldPath]
			if !ok {
				return nil, &ApplyError{Path: f.OldPath, Msg: "no such file"}
			}
			old = []byte(s)
		}
		b, err := f.Apply(old)
		if err != nil {
			return nil, err
		}
		switch f.Op {
		case Delete:
			out[f.OldPath] = nil
		case Rename:
			out[f.OldPath] = nil
			out[f.NewPath] = b
		default:
			out[f.Path()] = b
		}
	}
	return out, nil
}

func TestParseErrors(t *testing.T) {
	for diff, want := range map[string]string{
		"just text": "no file headers",
		"--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n":    "short",
		"--- a/x\n+++ b/x\n@@ nonsense @@\n":         "bad hunk header",
		"--- a/x\n+++ b/x\n@@ -1 +1 @@\n*bad\n":      "unexpected line",
		"--- a/x\n+++ b/x\nBinary files a/x and b/x": "binary",
	} {
		_, err := Parse(diff)
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want ParseError with %q", diff, err, want)
		}
	}
}

// TestWholeFileApplies: the diff WholeFile renders parses, counts what it
// says, and turns the old content into the new one.
func TestWholeFileApplies(t *testing.T) {
	for _, c := range []struct{ old, new string }{
		{"", "a\nb\n"},
		{"a\nb\n", "a\nc\nd\n"},
		{"x\n", "y\n"},
		{"héllo ✓\n", "héllo\n✓\n"},
	} {
		diff, added, removed := WholeFile("f.txt", c.old, c.new)
		files, err := Parse(diff)
		if err != nil || len(files) != 1 {
			t.Fatalf("%q → %q: %v\n%s", c.old, c.new, err, diff)
		}
		if a, r := files[0].Stats(); a != added || r != removed {
			t.Errorf("%q → %q: counts %d/%d, the diff says %d/%d", c.old, c.new, added, removed, a, r)
		}
		got, err := files[0].Apply([]byte(c.old))
		if err != nil || string(got) != c.new {
			t.Errorf("%q → %q: applied gives %q, %v", c.old, c.new, got, err)
		}
	}
}
