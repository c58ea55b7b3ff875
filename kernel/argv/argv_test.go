package argv

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{`go test ./...`, []string{"go", "test", "./..."}},
		{"  go\ttest  \n ./... ", []string{"go", "test", "./..."}},
		{`echo "a b" 'c d' e\ f`, []string{"echo", "a b", "c d", "e f"}},
		{`grep -r "x\"y" .`, []string{"grep", "-r", `x"y`, "."}},
		{`echo "a\qb" 'a\qb' a\qb`, []string{"echo", `a\qb`, `a\qb`, "aqb"}},
		{`echo "\$HOME" "\\" "\` + "`" + `"`, []string{"echo", "$HOME", `\`, "`"}},
		{`echo '' "" x`, []string{"echo", "", "", "x"}},
		{`echo a''b "c"d`, []string{"echo", "ab", "cd"}},
		// Metacharacters are literal: process.run starts no shell.
		{`ls $HOME && rm -rf / | cat > x`, []string{"ls", "$HOME", "&&", "rm", "-rf", "/", "|", "cat", ">", "x"}},
		{`go test>&0`, []string{"go", "test>&0"}},
		// As in sh: a backslash-newline joins lines, outside quotes and
		// inside double quotes but not inside single quotes; a backslash
		// that ends the line is literal.
		{"go \\\ntest", []string{"go", "test"}},
		{"go te\\\nst", []string{"go", "test"}},
		{"echo \"a\\\nb\" 'a\\\nb'", []string{"echo", "ab", "a\\\nb"}},
		{`echo a\`, []string{"echo", `a\`}},
		{`echo \`, []string{"echo", `\`}},
	}
	for _, c := range cases {
		got, err := Split(c.in)
		if err != nil || strings.Join(got, "\x00") != strings.Join(c.want, "\x00") {
			t.Errorf("Split(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{``, `   `, "\n\t", `'`, `echo "unterminated`, `echo 'x`} {
		if got, err := Split(bad); err == nil {
			t.Errorf("Split(%q) = %q, want an error", bad, got)
		}
	}
}

// shSplit is what /bin/sh makes of line as the arguments of a command: the
// oracle for Split, which no code here wrote. ok is false when sh refuses
// the line (an unterminated quote).
func shSplit(t testing.TB, line string) (args []string, ok bool) {
	t.Helper()
	out, err := exec.Command("/bin/sh", "-c", `printf '%s\0' START `+line).Output()
	if err != nil {
		return nil, false
	}
	fields := strings.Split(string(out), "\x00")
	if len(fields) < 2 || fields[0] != "START" || fields[len(fields)-1] != "" {
		t.Fatalf("sh printed %q for %q", out, line)
	}
	return fields[1 : len(fields)-1], true
}

// shComparable reports whether sh reads line only by quoting, so that its
// reading is Split's: no expansion, no operators, no comments, no
// reserved words, no line ends (a bare newline ends an sh command; Split
// has no commands).
func shComparable(line string) bool {
	return !strings.ContainsAny(line, "$`;&|<>()*?[]#~{}!\n\r\x00")
}

// TestSplitAgreesWithSh checks Split against /bin/sh on lines sh reads by
// quoting alone, and on the line continuations sh and Split both join.
func TestSplitAgreesWithSh(t *testing.T) {
	needSh(t)
	lines := append(seeds(), "go \\\ntest", "a\"b\\\nc\"d", "'a\\\nb'", `"\$x"`, "\"\\`\"")
	for _, line := range lines {
		agree(t, line)
	}
}

func FuzzSplitAgreesWithSh(f *testing.F) {
	needSh(f)
	for _, s := range seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if !shComparable(line) || len(line) > 512 {
			return
		}
		agree(t, line)
	})
}

// needSh skips without /bin/sh on a developer's machine; under CI a
// missing oracle is a failure.
func needSh(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("/bin/sh"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and no /bin/sh: the oracle for Split is missing")
		}
		t.Skip("SKIPPING: no /bin/sh to check Split against")
	}
}

func seeds() []string {
	return []string{
		`go test ./...`, `go test -run 'TestX|TestY' ./pkg`, `echo "a b" 'c d' e\ f`,
		`grep -r "x\"y" .`, `echo "a\qb" 'a\qb' a\qb`, `echo '' "" x`, `echo a''b "c"d`,
		`echo a\`, `\`, `echo "x`, `'`, `  `, "a\tb", `"\\" '\\' \\`, `a"'"b'"'c`,
		`npm run lint -- --fix`, `git log --format="%H %s" -n 3`, `printf '%s\n' "a\"b"`,
	}
}

func agree(t testing.TB, line string) {
	t.Helper()
	want, shOK := shSplit(t, line)
	got, err := Split(line)
	switch {
	case !shOK && err == nil:
		t.Errorf("Split(%q) = %q; sh refuses the line", line, got)
	case shOK && err != nil && len(want) > 0:
		t.Errorf("Split(%q) fails (%v); sh reads %q", line, err, want)
	case shOK && err == nil && !slices.Equal(got, want):
		t.Errorf("Split(%q) = %q; sh reads %q", line, got, want)
	}
	// Split refuses an empty command where sh runs printf with no extra
	// arguments: both read no words.
}
