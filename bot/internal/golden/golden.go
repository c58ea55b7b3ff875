// Package golden compares a test's output with a file under the test
// package's testdata/ directory; `go test -update` rewrites the files.
// Import it from tests only.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Check compares got with testdata/name, or writes it there with -update.
func Check(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (run go test -update and review the diff)\n--- got ---\n%s\n--- want ---\n%s", path, cut(got), cut(string(want)))
	}
}

// cut keeps a failure message readable: the first 3,000 runes.
func cut(s string) string {
	n := 0
	for i := range s {
		if n == 3000 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}
