package workspace

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExclude: an excluded path inside the workspace is out of bounds
// however it is named (absolute, relative, through a symlinked parent,
// not created yet), walks skip it, and writing there does not change the
// revision an approval is checked against. Paths outside are ignored; the
// root itself cannot be excluded.
func TestExclude(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "repo")
	mustW(t, filepath.Join(dir, "main.go"), "package main")
	mustW(t, filepath.Join(dir, ".agentos", "agentos.db"), "store")
	mustW(t, filepath.Join(dir, "var", "data", "x"), "x")
	if err := os.Symlink(dir, filepath.Join(parent, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		exclude string
		denied  []string
		allowed []string
	}{
		{"absolute", filepath.Join(dir, ".agentos"), []string{".agentos", ".agentos/agentos.db", "./.agentos/x", "var/../.agentos/y"}, []string{"main.go", ".agentosx", "var/data/x"}},
		{"relative to the root", "var/data", []string{"var/data", "var/data/x", "var/data/new/y"}, []string{"var", "var/datax", ".agentos/agentos.db"}},
		{"through a symlinked parent", filepath.Join(parent, "link", ".agentos"), []string{".agentos/agentos.db"}, []string{"main.go"}},
		{"not created yet", filepath.Join(dir, "later", "data"), []string{"later/data/s/events.jsonl"}, []string{"later/other"}},
		{"a single file", filepath.Join(dir, "events.jsonl"), []string{"events.jsonl"}, []string{"events.jsonl.bak"}},
		{"outside the workspace", filepath.Join(parent, "data"), nil, []string{"main.go", "data"}},
		{"escaping relative path", "../data", nil, []string{"main.go"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := Open(dir, Options{Exclude: []string{c.exclude}})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for _, p := range c.denied {
				if _, err := w.Resolve(p); !isJail(err) || !strings.Contains(err.Error(), "excluded") {
					t.Errorf("Resolve(%q) = %v, want an exclusion JAIL_VIOLATION", p, err)
				}
			}
			for _, p := range c.allowed {
				if _, err := w.Resolve(p); err != nil {
					t.Errorf("Resolve(%q): %v", p, err)
				}
			}
		})
	}
	w, err := Open(dir, Options{Exclude: []string{"var/data", filepath.Join(parent, "elsewhere")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Excluded(); len(got) != 1 || got[0] != filepath.Join(dir, "var", "data") {
		t.Errorf("Excluded() = %v", got)
	}
	w.Close()
	if _, err := Open(dir, Options{Exclude: []string{dir}}); err == nil || !strings.Contains(err.Error(), "workspace itself") {
		t.Errorf("excluding the root: %v", err)
	}
	if _, err := Open(dir, Options{Exclude: []string{"."}}); err == nil {
		t.Error("excluding . was accepted")
	}
}

func TestExcludedDirectoryIsNotWalkedNorInTheRevision(t *testing.T) {
	dir := t.TempDir()
	mustW(t, filepath.Join(dir, "main.go"), "package main")
	mustW(t, filepath.Join(dir, ".agentos", "sessions", "s", "events.jsonl"), "{}\n")
	w, err := Open(dir, Options{Exclude: []string{filepath.Join(dir, ".agentos")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var seen []string
	if err := w.Walk(context.Background(), func(rel string, d fs.DirEntry) error { seen = append(seen, rel); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, " ") != "main.go" {
		t.Errorf("walk saw %v", seen)
	}
	before, err := w.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The store grows while a run waits for approval; that must not make
	// the approval stale.
	mustW(t, filepath.Join(dir, ".agentos", "sessions", "s", "events.jsonl"), "{}\n{}\n")
	mustW(t, filepath.Join(dir, ".agentos", "agentos.db-wal"), "wal")
	after, err := w.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Error("writing into the excluded data directory changed the workspace revision")
	}
	if err := w.WriteFile(".agentos/sessions/s/events.jsonl", []byte("forged"), 0o644); !isJail(err) {
		t.Errorf("WriteFile into the excluded directory: %v", err)
	}
	if err := w.Remove(".agentos/agentos.db-wal"); !isJail(err) {
		t.Errorf("Remove in the excluded directory: %v", err)
	}
}
