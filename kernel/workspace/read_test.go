package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
)

// within fails the test if fn runs longer than d (a read blocked on a
// FIFO would otherwise hang the test).
func within(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %v", d)
	}
}

// TestReadsRefuseWhatIsNotARegularFile: a FIFO (which a sandboxed
// command can leave in the worktree), a directory and a file swapped for
// a FIFO after the walk listed it are refused at once with a structured
// error, never waited on; a missing file stays fs.ErrNotExist.
func TestReadsRefuseWhatIsNotARegularFile(t *testing.T) {
	w, dir, _ := jail(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"fifo", "sub", "."} {
		within(t, 10*time.Second, func() {
			_, err := w.ReadFile(p)
			var ke *kernel.Error
			if !errors.As(err, &ke) || ke.Code != kernel.CodeToolRuntimeError || !errors.Is(err, ErrNotRegular) || !strings.Contains(ke.Message, p) {
				t.Errorf("ReadFile(%q): %v, want a TOOL_RUNTIME_ERROR wrapping ErrNotRegular", p, err)
			}
		})
	}
	if _, err := w.ReadFile("missing.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
	if b, err := w.ReadFile("dirlink/inner.txt"); err != nil || string(b) != "inner" {
		t.Errorf("through an in-root symlink: %q %v", b, err)
	}
	// Swapped for a FIFO after the walk listed it.
	within(t, 10*time.Second, func() {
		err := w.WalkFiles(context.Background(), func(f *File) error {
			defer f.Release()
			if f.Rel != "ok.txt" {
				return nil
			}
			full := filepath.Join(dir, "ok.txt")
			if err := os.Remove(full); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(full, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Read(); !errors.Is(err, ErrNotRegular) {
				t.Errorf("a FIFO swapped in after the walk: %v, want ErrNotRegular", err)
			}
			return fs.SkipAll
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	// The revision digest walks past FIFOs without opening them.
	within(t, 10*time.Second, func() {
		if _, err := w.Revision(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

// TestReadFileRefusesALargeFile: a file over MaxFileSize is refused
// (ErrTooLarge, OUTPUT_LIMIT) without being read.
func TestReadFileRefusesALargeFile(t *testing.T) {
	w, dir, _ := jail(t)
	f, err := os.Create(filepath.Join(dir, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = w.ReadFile("huge.bin")
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || code(err) != kernel.CodeOutputLimit {
		t.Errorf("1 GiB file: %v, want OUTPUT_LIMIT wrapping ErrTooLarge", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("refusing it allocated %d bytes", grew)
	}
	if err := os.Truncate(filepath.Join(dir, "huge.bin"), MaxFileSize); err != nil {
		t.Fatal(err)
	}
	if b, err := w.ReadFile("huge.bin"); err != nil || len(b) != MaxFileSize {
		t.Errorf("a file of exactly MaxFileSize: %d bytes, %v", len(b), err)
	}
	r, err := w.Open("huge.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, full, err := r.ReadPrefix(100); err != nil || full || len(b) != 100 {
		t.Errorf("ReadPrefix(100) of a larger file: %d bytes, full %v, %v", len(b), full, err)
	}
}

func code(err error) kernel.Code {
	var ke *kernel.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return ""
}

// TestWalkFilesSkippedReportsWhatIsNotAFile: symlinks and FIFOs are not
// walked but reported; ignored and denied ones are not.
func TestWalkFilesSkippedReportsWhatIsNotAFile(t *testing.T) {
	w, dir, _ := jail(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "sub", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, ".git", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	var skipped []string
	err := w.WalkFilesSkipped(context.Background(), func(f *File) error { f.Release(); return nil }, func(rel string, typ fs.FileMode) {
		skipped = append(skipped, rel)
	})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(skipped, ",")
	if !strings.Contains(got, "sub/fifo") || !strings.Contains(got, "to-secret") || strings.Contains(got, ".git") {
		t.Errorf("skipped %v: want sub/fifo and the symlinks, nothing under .git", got)
	}
}

// TestGitInternalsCaseInsensitive: on a case-insensitive file system
// .GIT/config is .git/config, so the jail refuses it under any case.
func TestGitInternalsCaseInsensitive(t *testing.T) {
	w, _, _ := jail(t)
	for _, p := range []string{".GIT/config", ".Git/hooks/pre-commit", "sub/.gIt/x"} {
		if _, err := w.Resolve(p); code(err) != kernel.CodeJailViolation {
			t.Errorf("Resolve(%q): %v, want JAIL_VIOLATION", p, err)
		}
	}
}

// TestFSRefusesFIFOs: the runtime's configuration reads (Root.FS) refuse
// a FIFO at once; regular files, directories and in-root symlinks read
// as before.
func TestFSRefusesFIFOs(t *testing.T) {
	w, dir, _ := jail(t)
	if err := os.MkdirAll(filepath.Join(dir, ".agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, ".agent", "memory.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys := w.FS()
	within(t, 10*time.Second, func() {
		if _, err := fs.ReadFile(fsys, ".agent/memory.md"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadFile of a FIFO: %v, want ErrNotRegular", err)
		}
		if _, err := fsys.Open(".agent/memory.md"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Open of a FIFO: %v, want ErrNotRegular", err)
		}
		if _, err := fs.ReadDir(fsys, ".agent/memory.md"); !errors.Is(err, ErrNotRegular) {
			t.Errorf("ReadDir of a FIFO: %v, want ErrNotRegular", err)
		}
		if fi, err := fs.Stat(fsys, ".agent/memory.md"); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
			t.Errorf("Stat of a FIFO: %v", err)
		}
	})
	if b, err := fs.ReadFile(fsys, "dirlink/inner.txt"); err != nil || string(b) != "inner" {
		t.Errorf("ReadFile through an in-root link: %q %v", b, err)
	}
	if ds, err := fs.ReadDir(fsys, "sub"); err != nil || len(ds) == 0 {
		t.Errorf("ReadDir: %v %v", ds, err)
	}
	if _, err := fs.ReadFile(fsys, "to-secret"); err == nil {
		t.Error("read through a link out of the root")
	}
}
