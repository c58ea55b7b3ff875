package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/workspace"
)

// memRecorder keeps the kernel's events in memory.
type memRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *memRecorder) Record(ctx context.Context, typ, actor string, payload any, parent string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, typ)
	return fmt.Sprint(len(r.events)), nil
}

// edgeTree is a worktree of the inputs that broke the file tools: an
// empty file, a binary one, one over the 16 MiB read cap, unicode lines
// longer than the output limit, a FIFO, symlinks in and out of the root,
// a directory.
func edgeTree(t *testing.T) (*tools, string) {
	t.Helper()
	uni := strings.Repeat("héllo wörld ✓ 日本語 ", 40) + "\n"
	tl, dir := tree(t, map[string]string{
		"empty.txt":   "",
		"bin.dat":     "ELF\x00\x01\x02 CheckToken",
		"unicode.txt": strings.Repeat(uni, 30) + "no newline at the end ✓",
		"dir/a.txt":   "CheckToken\n",
		"crlf.txt":    "one\r\ntwo\r\n",
	})
	big, err := os.Create(filepath.Join(dir, "big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 63) + "\n")
	chunk := bytes.Repeat(line, 1<<14) // 1 MiB
	for i := 0; i < 17; i++ {
		big.Write(chunk)
	}
	big.WriteString("CheckToken at the end\n")
	big.Close()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("unicode.txt", filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "out.txt")); err != nil {
		t.Fatal(err)
	}
	return tl, dir
}

// dispatch runs one call through the kernel (which validates the result
// against the tool's output schema) with a deadline: a read that blocks
// fails the test instead of hanging it.
func dispatch(t *testing.T, k *kernel.Kernel, tool, args string) (json.RawMessage, error) {
	t.Helper()
	type res struct {
		out kernel.Outcome
		err error
	}
	ch := make(chan res, 1)
	go func() {
		out, err := k.Dispatch(context.Background(), &memRecorder{}, kernel.Call{ID: "c", Name: tool, Args: json.RawMessage(args)})
		ch <- res{out, err}
	}()
	select {
	case r := <-ch:
		return r.out.Result, r.err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s %s: still running after 20 s", tool, args)
		return nil, nil
	}
}

// TestReadToolsEdgeInputs: every call of repo.read and repo.search on the
// edge inputs ends in a result that validates against the tool's output
// schema (the kernel checks it: a violation is SCHEMA_VIOLATION) or in a
// structured kernel error; none hangs.
func TestReadToolsEdgeInputs(t *testing.T) {
	tl, _ := edgeTree(t)
	p := policy.Default()
	k := kernel.New(p, tl.ws, nil)
	for _, d := range []kernel.ToolDef{tl.read(), tl.search()} {
		if err := k.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	limit := p.Limits.MaxStdout
	var calls []struct{ tool, args string }
	for _, f := range []string{"empty.txt", "bin.dat", "unicode.txt", "big.txt", "fifo", "link.txt", "out.txt", "dir", "crlf.txt", "missing.txt", "."} {
		for _, r := range []string{"", `,"range":[1,1]`, `,"range":[2,5]`, `,"range":[1000,2000]`, `,"range":[260000,260001]`, `,"range":[300000,300001]`} {
			calls = append(calls, struct{ tool, args string }{"repo.read", `{"path":"` + f + `"` + r + `}`})
		}
	}
	for _, q := range []string{
		`{"query":"zzz-no-such-text"}`,
		`{"query":"CheckToken"}`,
		`{"query":"日本語"}`,
		`{"query":"x+","regex":true}`,
		`{"query":"x","globs":["fifo"]}`,
		`{"query":"x","globs":["*.none"]}`,
		`{"query":"o","max_results":2000}`,
	} {
		calls = append(calls, struct{ tool, args string }{"repo.search", q})
	}
	for _, c := range calls {
		raw, err := dispatch(t, k, c.tool, c.args)
		var ke *kernel.Error
		switch {
		case err == nil:
		case !errors.As(err, &ke):
			t.Errorf("%s %s: unstructured error %v", c.tool, c.args, err)
			continue
		case ke.Code == kernel.CodeSchemaViolation:
			t.Errorf("%s %s: %v", c.tool, c.args, err)
			continue
		default:
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if s, ok := m["content"].(string); ok && len(s) > limit {
			t.Errorf("%s %s: %d bytes of content, over the output limit %d", c.tool, c.args, len(s), limit)
		}
		if ms, ok := m["matches"].([]any); ok {
			n := 0
			for _, x := range ms {
				n += len(x.(map[string]any)["text"].(string))
			}
			if n > limit {
				t.Errorf("%s %s: %d bytes of matches, over the output limit %d", c.tool, c.args, n, limit)
			}
		}
	}

	// What each edge case must give.
	read := func(args string) (map[string]any, error) {
		raw, err := dispatch(t, k, "repo.read", args)
		var m map[string]any
		json.Unmarshal(raw, &m)
		return m, err
	}
	if _, err := read(`{"path":"fifo"}`); !errors.Is(err, workspace.ErrNotRegular) || code(err) != kernel.CodeToolRuntimeError {
		t.Errorf("fifo: %v, want TOOL_RUNTIME_ERROR wrapping ErrNotRegular", err)
	}
	if _, err := read(`{"path":"dir"}`); !errors.Is(err, workspace.ErrNotRegular) {
		t.Errorf("dir: %v, want ErrNotRegular", err)
	}
	if _, err := read(`{"path":"out.txt"}`); code(err) != kernel.CodeJailViolation {
		t.Errorf("symlink out of the root: %v, want JAIL_VIOLATION", err)
	}
	if m, err := read(`{"path":"empty.txt"}`); err != nil || m["content"] != "" || m["total_lines"] != 0.0 || m["sha256"] != Sha256Hex(nil) || m["truncated"] != false {
		t.Errorf("empty file: %v %v", m, err)
	}
	if m, err := read(`{"path":"link.txt","range":[1,1]}`); err != nil || !strings.HasPrefix(m["content"].(string), "héllo") || m["total_lines"] != 31.0 {
		t.Errorf("symlink in the root: %v %v", m, err)
	}
	if m, err := read(`{"path":"unicode.txt"}`); err != nil || m["truncated"] != true || !utf8.ValidString(m["content"].(string)) || !strings.HasSuffix(m["content"].(string), "\n") {
		t.Errorf("unicode over the limit: want whole lines, valid UTF-8, truncated: %v", err)
	}
	if m, err := read(`{"path":"big.txt"}`); err != nil || m["truncated"] != true || m["sha256"] != nil || m["total_lines"] != nil || m["size"] != float64(17<<20+22) {
		t.Errorf("file over 16 MiB: want truncated, no sha256 and total_lines: %v", err)
	}
	if m, err := read(`{"path":"big.txt","range":[260000,260001]}`); err != nil || m["content"] != strings.Repeat("x", 63)+"\n"+strings.Repeat("x", 63)+"\n" {
		t.Errorf("a range inside the first 16 MiB of a larger file: %v %v", m, err)
	}
	if _, err := read(`{"path":"big.txt","range":[300000,300001]}`); code(err) != kernel.CodeOutputLimit {
		t.Errorf("a range past the first 16 MiB: %v, want OUTPUT_LIMIT", err)
	}
	if m, err := read(`{"path":"crlf.txt","range":[2,2]}`); err != nil || m["content"] != "two\r\n" || m["total_lines"] != 2.0 {
		t.Errorf("crlf: %v %v", m, err)
	}
	raw, err := dispatch(t, k, "repo.search", `{"query":"zzz-no-such-text"}`)
	if err != nil || !bytes.Contains(raw, []byte(`"matches":[]`)) {
		t.Errorf("no matches: %s %v, want matches: []", raw, err)
	}
	var s struct {
		Matches []Match
		Skipped int `json:"files_skipped"`
		Cut     int `json:"files_cut"`
	}
	raw, err = dispatch(t, k, "repo.search", `{"query":"CheckToken"}`)
	json.Unmarshal(raw, &s)
	// fifo, link.txt, out.txt are not regular files; big.txt is cut, so
	// its last line is not searched; bin.dat is binary.
	if err != nil || s.Skipped != 3 || s.Cut != 1 || len(s.Matches) != 1 || s.Matches[0].Path != "dir/a.txt" {
		t.Errorf("search: %s %v; want one match, 3 skipped, 1 cut", raw, err)
	}
}

func code(err error) kernel.Code {
	var ke *kernel.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return ""
}

// TestReadLinesProperty: for random text (unicode, CRLF, long lines, no
// final newline), ranges and limits, readLines returns exactly the
// range's lines when they fit, else whole lines of it up to end_line (or
// a UTF-8-clean prefix of a single line longer than the limit), never
// more than the limit, with the file's own line count and SHA-256.
func TestReadLinesProperty(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pieces := []string{"a", "bc", "é", "日本", "✓", " ", "\n", "\n", "\r\n", strings.Repeat("z", 70000), strings.Repeat("ü", 500)}
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := rng.Intn(60); n > 0; n-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		text := b.String()
		lines := strings.SplitAfter(text, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		start, end := 1, 0
		if rng.Intn(2) == 0 {
			start = 1 + rng.Intn(len(lines)+2)
			end = start + rng.Intn(5)
		}
		limit := 1 + rng.Intn(200)
		if rng.Intn(3) == 0 {
			limit = 1 + rng.Intn(200000)
		}
		r, err := readLines(context.Background(), strings.NewReader(text), true, start, end, limit)
		if err != nil {
			t.Fatal(err)
		}
		last := len(lines)
		if end > 0 {
			last = min(end, len(lines))
		}
		want := ""
		if start <= last {
			want = strings.Join(lines[start-1:last], "")
		}
		sum := sha256.Sum256([]byte(text))
		got := string(r.content)
		fail := func(why string) {
			t.Fatalf("case %d (start %d end %d limit %d, %d lines): %s; got end_line %d truncated %v content %q", i, start, end, limit, len(lines), why, r.endLine, r.truncated, got[:min(len(got), 80)])
		}
		switch {
		case !r.complete || r.total != len(lines) || hex.EncodeToString(r.sum) != hex.EncodeToString(sum[:]):
			fail("line count or hash")
		case len(got) > limit:
			fail("over the limit")
		case !utf8.ValidString(got):
			fail("invalid UTF-8")
		case !r.truncated && got != want:
			fail("not truncated, but not the range")
		case !r.truncated && start <= last && r.endLine != last:
			fail("end_line is not the range's last line")
		case !r.truncated && start > last && r.endLine != min(start-1, len(lines)):
			fail("end_line of an empty range")
		case r.truncated && !strings.HasPrefix(want, got):
			fail("not a prefix of the range")
		case r.truncated && r.endLine >= start && got != strings.Join(lines[start-1:r.endLine], "") && !(r.endLine == start && strings.HasPrefix(lines[start-1], got) && len(lines[start-1]) > limit):
			fail("neither whole lines up to end_line nor the start of one long line")
		case r.truncated && len(want) <= limit:
			fail("truncated, but the range fits")
		}
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestReadLinesStopsAfterTheRange: of a file over the 16 MiB cap, a
// ranged read stops right after the range and a whole read right after
// the output limit; neither reads more than the cap.
func TestReadLinesStopsAfterTheRange(t *testing.T) {
	line := strings.Repeat("y", 99) + "\n"
	huge := func() *countingReader {
		return &countingReader{r: io.LimitReader(repeatReader(line), 1<<30)}
	}
	cr := huge()
	r, err := readLines(context.Background(), cr, false, 10, 12, 20000)
	if err != nil || string(r.content) != line+line+line || r.truncated || r.complete || r.endLine != 12 {
		t.Fatalf("range: %+v %v", r, err)
	}
	if cr.n > 256<<10 {
		t.Errorf("a range at the start of a 1 GiB file read %d bytes", cr.n)
	}
	cr = huge()
	r, err = readLines(context.Background(), cr, false, 1, 0, 20000)
	if err != nil || !r.truncated || len(r.content) != 200*100 || r.endLine != 200 {
		t.Fatalf("whole: end %d truncated %v len %d %v", r.endLine, r.truncated, len(r.content), err)
	}
	if cr.n > 256<<10 {
		t.Errorf("a whole read of a 1 GiB file read %d bytes", cr.n)
	}
	cr = huge()
	if _, err := readLines(context.Background(), cr, false, 1<<30, 1<<30, 20000); err != nil || cr.n > workspace.MaxFileSize+64<<10 {
		t.Errorf("a range past the cap read %d bytes (%v)", cr.n, err)
	}
}

type repeatReader string

func (s repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], s)
	}
	return n, nil
}

// TestWritesRefuseWhatTheyCannotRead: the reads of repo.patch and
// repo.write refuse a FIFO and a 1 GiB file with a structured error,
// quickly and without loading it, and neither is replaced.
func TestWritesRefuseWhatTheyCannotRead(t *testing.T) {
	tl, dir := tree(t, map[string]string{"ok.txt": "a\n"})
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.go"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "huge.go"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	p := policy.Default()
	k := kernel.New(p, tl.ws, nil)
	for _, d := range []kernel.ToolDef{tl.patchTool(), tl.write()} {
		if err := k.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	diff := func(p string) string {
		b, _ := json.Marshal(map[string]string{"unifiedDiff": "--- a/" + p + "\n+++ b/" + p + "\n@@ -1 +1 @@\n-a\n+b\n"})
		return string(b)
	}
	write := func(p string) string {
		b, _ := json.Marshal(map[string]string{"path": p, "content": "b\n", "expected_hash": ""})
		return string(b)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, c := range []struct {
		tool, args string
		want       error
	}{
		{"repo.patch", diff("pipe.go"), workspace.ErrNotRegular},
		{"repo.patch", diff("huge.go"), workspace.ErrTooLarge},
		{"repo.write", write("pipe.go"), workspace.ErrNotRegular},
		{"repo.write", write("huge.go"), workspace.ErrTooLarge},
	} {
		_, err := dispatch(t, k, c.tool, c.args)
		var ke *kernel.Error
		if !errors.As(err, &ke) || !errors.Is(err, c.want) {
			t.Errorf("%s %s: %v, want a kernel error wrapping %v", c.tool, c.args, err, c.want)
		}
		// The handlers refuse too, if the assessment were skipped.
		var d kernel.ToolDef
		if c.tool == "repo.patch" {
			d = tl.patchTool()
		} else {
			d = tl.write()
		}
		if _, err := d.Handler(context.Background(), env, json.RawMessage(c.args)); !errors.Is(err, c.want) {
			t.Errorf("%s handler %s: %v, want %v", c.tool, c.args, err, c.want)
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("refusing allocated %d MiB", grew>>20)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "pipe.go")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "huge.go")); err != nil || fi.Size() != 1<<30 {
		t.Errorf("the large file was replaced: %v", err)
	}
}
