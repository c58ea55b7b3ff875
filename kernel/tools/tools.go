// Package tools holds the capability tools:
// repo.read, repo.search, repo.patch, repo.write (the protected write),
// process.run, test.run, lint.run and echo. Every tool is a kernel.ToolDef
// with input and output schemas and an Assess that describes the call
// without side effects; every handler works only through the workspace
// jail. Argument names follow the tools' schemas exactly.
package tools

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/failpoint"
	"github.com/agentos/agentos/kernel/patch"
	"github.com/agentos/agentos/kernel/workspace"
	"gopkg.in/yaml.v3"
)

// Options configure the tools.
type Options struct {
	// AllowShell lets process.run start an explicit shell (sh -c ...).
	AllowShell bool
	// Timeouts per capability (the kernel also bounds the handler's ctx).
	Timeouts map[string]time.Duration
}

// Defs returns every capability tool bound to a workspace.
func Defs(ws *workspace.Root, opts Options) []kernel.ToolDef {
	t := &tools{ws: ws, opts: opts}
	return []kernel.ToolDef{t.echo(), t.read(), t.search(), t.patchTool(), t.write(), t.process(), t.test(), t.lint()}
}

type tools struct {
	ws   *workspace.Root
	opts Options
}

func decode(args json.RawMessage, v any) error {
	if err := json.Unmarshal(args, v); err != nil {
		return &kernel.Error{Kind: "guard", Code: kernel.CodeInvalidArguments, Message: err.Error()}
	}
	return nil
}

// Sha256Hex is the protected write's content hash.
func Sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (t *tools) echo() kernel.ToolDef {
	return kernel.ToolDef{
		Name: "echo", Description: "Echo text back (the seed's test tool).", Category: kernel.CategoryRead,
		Input:  json.RawMessage(`{"type":"object","additionalProperties":false,"required":["text"],"properties":{"text":{"type":"string","maxLength":10000}}}`),
		Output: json.RawMessage(`{"type":"object","required":["text"],"properties":{"text":{"type":"string"}}}`),
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			var a struct{ Text string }
			if err := decode(args, &a); err != nil {
				return nil, err
			}
			return map[string]string{"text": a.Text}, nil
		},
	}
}

// outputLimit is the most a file tool returns of a file's text: the exec
// tools' limits.maxStdout (docs/kernel-policy.md), the same default when
// the policy sets none.
func outputLimit(env kernel.Env) int {
	if env.Limits.MaxStdout > 0 {
		return env.Limits.MaxStdout
	}
	return workspace.DefaultMaxOutput
}

func (t *tools) read() kernel.ToolDef {
	return kernel.ToolDef{
		Name: "repo.read", Description: "Read a file of the repository, optionally a 1-based inclusive line range [start, end]. The content is cut to the output limit at a line boundary (truncated: true; end_line is the last line returned, read on from there). sha256 and total_lines are the whole file's; they are absent for a file over 16 MiB, of which only the first 16 MiB are read.", Category: kernel.CategoryRead,
		Input: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string","minLength":1},
			"range":{"type":"array","items":{"type":"integer","minimum":1},"minItems":2,"maxItems":2}}}`),
		Output: json.RawMessage(`{"type":"object","required":["path","content","size","start_line","end_line","truncated"],"properties":{
			"path":{"type":"string"},"content":{"type":"string"},"sha256":{"type":"string","pattern":"^[0-9a-f]{64}$"},"total_lines":{"type":"integer","minimum":0},
			"size":{"type":"integer","minimum":0},"start_line":{"type":"integer","minimum":1},"end_line":{"type":"integer","minimum":0},"truncated":{"type":"boolean"}}}`),
		Assess: func(ctx context.Context, env kernel.Env, args json.RawMessage) (kernel.Assessment, error) {
			var a struct{ Path string }
			if err := decode(args, &a); err != nil {
				return kernel.Assessment{}, err
			}
			if _, err := t.ws.Resolve(a.Path); err != nil {
				return kernel.Assessment{}, err
			}
			return kernel.Assessment{Paths: []string{a.Path}}, nil
		},
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			var a struct {
				Path  string
				Range []int
			}
			if err := decode(args, &a); err != nil {
				return nil, err
			}
			start, end := 1, 0
			if len(a.Range) == 2 {
				start, end = a.Range[0], a.Range[1]
				if start > end {
					return nil, &kernel.Error{Kind: "guard", Code: kernel.CodeInvalidArguments, Message: fmt.Sprintf("range [%d, %d] is empty", start, end)}
				}
			}
			f, err := t.ws.Open(a.Path)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			r, err := readLines(ctx, f, f.Size() <= workspace.MaxFileSize, start, end, outputLimit(env))
			if err != nil {
				return nil, err
			}
			if r.binary {
				return nil, &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: a.Path + " is a binary file"}
			}
			if !r.complete && r.endLine < start {
				return nil, &kernel.Error{Kind: "runtime", Code: kernel.CodeOutputLimit, Message: fmt.Sprintf("%s is %d bytes; line %d is past the first %d bytes, which are all repo.read reads of a file: find the text with repo.search", a.Path, f.Size(), start, workspace.MaxFileSize)}
			}
			res := map[string]any{"path": a.Path, "size": f.Size(), "start_line": start, "end_line": r.endLine, "truncated": r.truncated, "content": env.Redact(string(r.content))}
			if r.complete {
				res["sha256"], res["total_lines"] = hex.EncodeToString(r.sum), r.total
			}
			return res, nil
		},
	}
}

// lines is what readLines found.
type lines struct {
	content   []byte // lines start..endLine, at most the output limit
	endLine   int    // the last line (partly) in content; start-1 if none
	truncated bool   // content stops before the range (or the file) ends
	binary    bool   // a NUL byte in the first 8000 bytes (git's heuristic)
	complete  bool   // the whole file was read: total and sum are its own
	total     int    // lines read
	sum       []byte // SHA-256 of the bytes read
}

// readLines streams a file once, with a bounded buffer: it keeps lines
// start..end (end 0: to the last) up to max bytes, cut at a line
// boundary (a single line longer than max is cut at a UTF-8 boundary),
// and counts and hashes the lines for total_lines and sha256. It reads at
// most workspace.MaxFileSize bytes; of a larger file (whole false) it
// stops as soon as the range is read, since its hash could not be
// complete anyway.
func readLines(ctx context.Context, f io.Reader, whole bool, start, end, max int) (lines, error) {
	h := sha256.New()
	lr := &io.LimitedReader{R: f, N: workspace.MaxFileSize}
	br := bufio.NewReaderSize(io.TeeReader(lr, h), 64<<10)
	out := lines{endLine: start - 1}
	if head, _ := br.Peek(8000); bytes.IndexByte(head, 0) >= 0 {
		out.binary = true
		return out, nil
	}
	inRange := func(n int) bool { return n >= start && (end == 0 || n <= end) }
	n, inLine, full, stopped := 1, false, false, false // line number, mid-line, content full, stopped early
	lastWhole := start - 1                             // last line wholly in content
	for {
		chunk, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull && err != io.EOF {
			return out, err
		}
		if len(chunk) > 0 {
			inLine = true
			if inRange(n) && !full {
				if room := max - len(out.content); len(chunk) <= room {
					out.content = append(out.content, chunk...)
					out.endLine = n
				} else if full = true; lastWhole >= start {
					// Cut at the last whole line: end_line is where a
					// ranged read goes on.
					out.content, out.endLine = out.content[:wholeLen(out.content, lastWhole-start+1)], lastWhole
				} else {
					// The range's first line alone is over the limit.
					cut := room
					for cut > 0 && !utf8.RuneStart(chunk[cut]) {
						cut--
					}
					out.content, out.endLine = append(out.content, chunk[:cut]...), n
				}
			}
		}
		if err == nil || (err == io.EOF && inLine) {
			// A line ends here (or the file ends within one).
			if inRange(n) && !full {
				lastWhole = n
			}
			out.total, n, inLine = n, n+1, false
		}
		if err == io.EOF {
			break
		}
		if full || (end > 0 && n > end) {
			if !whole {
				stopped = true
				break
			}
			// Only total_lines and sha256 are left: count in bulk.
			if err := countRest(ctx, br, &out.total, inLine); err != nil {
				return out, err
			}
			break
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
	}
	// Complete: read to the end, and no byte past MaxFileSize.
	out.complete = !stopped && lr.N > 0
	if !stopped && lr.N <= 0 {
		var one [1]byte
		k, _ := f.Read(one[:])
		out.complete = k == 0
	}
	out.truncated = full || (!out.complete && (end == 0 || out.endLine < end))
	if out.complete {
		out.sum = h.Sum(nil)
		out.endLine = min(out.endLine, out.total)
	} else {
		out.total = 0
	}
	return out, nil
}

// countRest reads r to its end and adds the lines that end in it to
// *total; mid says a line has begun and not ended before r (it is not in
// *total yet).
func countRest(ctx context.Context, r io.Reader, total *int, mid bool) error {
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if c := bytes.Count(buf[:k], []byte{'\n'}); c > 0 {
				*total += c
				mid = buf[k-1] != '\n'
			} else {
				mid = true
			}
		}
		if err == io.EOF {
			if mid {
				*total++
			}
			return nil
		}
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// wholeLen is the length of the first k lines of b.
func wholeLen(b []byte, k int) int {
	off := 0
	for i := 0; i < k; i++ {
		j := bytes.IndexByte(b[off:], '\n')
		if j < 0 {
			return len(b)
		}
		off += j + 1
	}
	return off
}

func (t *tools) patchTool() kernel.ToolDef {
	return kernel.ToolDef{
		Name: "repo.patch", Description: "Apply a git-style unified diff (one or more files; new, deleted and renamed files). Every hunk's context must match the file exactly; all files change or none.", Category: kernel.CategoryWrite,
		Input: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["unifiedDiff"],"properties":{
			"path":{"type":"string","minLength":1},"unifiedDiff":{"type":"string","minLength":1}}}`),
		Output: json.RawMessage(`{"type":"object","required":["files","lines_added","lines_removed"],"properties":{
			"files":{"type":"array","items":{"type":"object","required":["path","op"],"properties":{
				"path":{"type":"string"},"old_path":{"type":"string"},"op":{"type":"string"},
				"hash":{"type":"string","pattern":"^[0-9a-f]{64}$","description":"sha256 of the file's content after the patch; absent for a deletion"}}}},
			"lines_added":{"type":"integer"},"lines_removed":{"type":"integer"}}}`),
		Assess: func(ctx context.Context, env kernel.Env, args json.RawMessage) (kernel.Assessment, error) {
			_, _, a, err := t.planPatch(args)
			return a, err
		},
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			fps, results, a, err := t.planPatch(args)
			if err != nil {
				return nil, err
			}
			if err := t.commit(fps, results); err != nil {
				return nil, err
			}
			failpoint.Hit(failpoint.PatchApplied)
			return map[string]any{"files": patchedFiles(fps, results, a.Files), "lines_added": a.LinesAdded, "lines_removed": a.LinesRemoved}, nil
		},
	}
}

// planPatch parses and applies a diff in memory: nothing is written.
func (t *tools) planPatch(args json.RawMessage) ([]patch.File, [][]byte, kernel.Assessment, error) {
	var a struct {
		Path        string
		UnifiedDiff string `json:"unifiedDiff"`
	}
	if err := decode(args, &a); err != nil {
		return nil, nil, kernel.Assessment{}, err
	}
	fps, err := patch.Parse(a.UnifiedDiff)
	if err != nil {
		return nil, nil, kernel.Assessment{}, &kernel.Error{Kind: "guard", Code: kernel.CodeInvalidArguments, Message: "unifiedDiff: " + err.Error()}
	}
	as := kernel.Assessment{Diff: a.UnifiedDiff}
	results := make([][]byte, len(fps))
	for i := range fps {
		f := &fps[i]
		for _, p := range []string{f.OldPath, f.NewPath} {
			if p == "" {
				continue
			}
			if a.Path != "" && p != a.Path {
				return nil, nil, as, &kernel.Error{Kind: "guard", Code: kernel.CodeInvalidArguments, Message: fmt.Sprintf("the diff touches %s, but path is %s", p, a.Path)}
			}
			if _, err := t.ws.Resolve(p); err != nil {
				return nil, nil, as, err
			}
		}
		var old []byte
		if f.Op != patch.Create {
			// Bounded (workspace.MaxFileSize, regular files only): a FIFO
			// or a huge target is refused with its own structured error.
			b, err := t.ws.ReadFile(f.OldPath)
			var ke *kernel.Error
			if errors.As(err, &ke) {
				return nil, nil, as, ke
			}
			if err != nil {
				return nil, nil, as, &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: fmt.Sprintf("%s: %v", f.OldPath, err)}
			}
			old = b
		} else if _, err := t.ws.Stat(f.NewPath); err == nil {
			return nil, nil, as, &kernel.Error{Kind: "lock", Code: kernel.CodeWriteConflict, Message: f.NewPath + " already exists; the diff creates it"}
		}
		out, err := f.Apply(old)
		if err != nil {
			return nil, nil, as, &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: err.Error(), Err: err}
		}
		if f.Op == patch.Delete && len(out) > 0 {
			return nil, nil, as, &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: f.OldPath + ": the diff deletes the file but does not remove all of its lines"}
		}
		results[i] = out
		added, removed := f.Stats()
		as.Files = append(as.Files, kernel.FileChange{Path: f.Path(), OldPath: renamedFrom(f), Op: string(f.Op), Hunks: len(f.Hunks), Added: added, Removed: removed})
		as.LinesAdded += added
		as.LinesRemoved += removed
		as.Paths = append(as.Paths, f.Path())
	}
	return fps, results, as, nil
}

func renamedFrom(f *patch.File) string {
	if f.Op == patch.Rename {
		return f.OldPath
	}
	return ""
}

// commit writes the planned results; if a write fails, files already
// written are restored, so a patch applies all or nothing.
func (t *tools) commit(fps []patch.File, results [][]byte) error {
	type undo struct {
		path string
		old  []byte
		had  bool
	}
	var done []undo
	rollback := func() {
		for i := len(done) - 1; i >= 0; i-- {
			u := done[i]
			if u.had {
				_ = t.ws.WriteFile(u.path, u.old, 0o644)
			} else {
				_ = t.ws.Remove(u.path)
			}
		}
	}
	save := func(p string) {
		b, err := t.ws.ReadFile(p)
		done = append(done, undo{path: p, old: b, had: err == nil})
	}
	for i, f := range fps {
		var err error
		switch f.Op {
		case patch.Delete:
			save(f.OldPath)
			err = t.ws.Remove(f.OldPath)
		case patch.Rename:
			save(f.NewPath)
			if err = t.ws.WriteFile(f.NewPath, results[i], 0o644); err == nil {
				save(f.OldPath)
				err = t.ws.Remove(f.OldPath)
			}
		default:
			save(f.Path())
			err = t.ws.WriteFile(f.Path(), results[i], 0o644)
		}
		if err != nil {
			rollback()
			return err
		}
	}
	return nil
}

func (t *tools) write() kernel.ToolDef {
	return kernel.ToolDef{
		Name: "repo.write", Description: "Protected write (write_claim_v1): replace a file's content only if its current SHA-256 is expected_hash (\"\" for a file that must not exist yet).", Category: kernel.CategoryWrite,
		Input: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path","content","expected_hash"],"properties":{
			"path":{"type":"string","minLength":1},"content":{"type":"string"},
			"expected_hash":{"type":"string","pattern":"^([0-9a-f]{64})?$"},"why":{"type":"string"}}}`),
		Output: json.RawMessage(`{"type":"object","required":["path","hash"],"properties":{"path":{"type":"string"},"hash":{"type":"string"}}}`),
		Assess: func(ctx context.Context, env kernel.Env, args json.RawMessage) (kernel.Assessment, error) {
			var a struct {
				Path, Content string
				Expected      string `json:"expected_hash"`
			}
			if err := decode(args, &a); err != nil {
				return kernel.Assessment{}, err
			}
			if _, err := t.ws.Resolve(a.Path); err != nil {
				return kernel.Assessment{}, err
			}
			old, err := t.ws.ReadFile(a.Path)
			op := "modify"
			if errors.Is(err, fs.ErrNotExist) {
				op, old = "create", nil
			} else if err != nil {
				return kernel.Assessment{}, err // not a regular file, or over workspace.MaxFileSize
			}
			diff, added, removed := patch.WholeFile(a.Path, string(old), a.Content)
			// A stale hash is refused before anyone is asked to approve a
			// write that cannot happen (the handler checks again).
			return kernel.Assessment{Paths: []string{a.Path}, Files: []kernel.FileChange{{Path: a.Path, Op: op, Hunks: 1, Added: added, Removed: removed}}, LinesAdded: added, LinesRemoved: removed, Diff: diff,
				Refuse: writeConflict(a.Path, old, op == "modify", a.Expected)}, nil
		},
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			var a struct {
				Path, Content string
				Expected      string `json:"expected_hash"`
			}
			if err := decode(args, &a); err != nil {
				return nil, err
			}
			cur, err := t.ws.ReadFile(a.Path)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err // not a regular file, or over workspace.MaxFileSize
			}
			if kerr := writeConflict(a.Path, cur, err == nil, a.Expected); kerr != nil {
				return nil, kerr
			}
			if err := t.ws.WriteFile(a.Path, []byte(a.Content), 0o644); err != nil {
				return nil, err
			}
			return map[string]string{"path": a.Path, "hash": Sha256Hex([]byte(a.Content))}, nil
		},
	}
}

// writeConflict is repo.write's lock: the file's current content (cur,
// when it exists) must hash to expected, "" for a file that must not
// exist yet.
func writeConflict(path string, cur []byte, exists bool, expected string) *kernel.Error {
	switch {
	case expected == "" && exists:
		return &kernel.Error{Kind: "lock", Code: kernel.CodeWriteConflict, Message: fmt.Sprintf("%s exists (sha256 %s); pass its hash as expected_hash", path, Sha256Hex(cur))}
	case expected != "" && !exists:
		return &kernel.Error{Kind: "lock", Code: kernel.CodeWriteConflict, Message: path + " does not exist; expected_hash must be \"\""}
	case expected != "" && Sha256Hex(cur) != expected:
		return &kernel.Error{Kind: "lock", Code: kernel.CodeWriteConflict, Message: fmt.Sprintf("%s changed: its sha256 is %s, not %s; read it again", path, Sha256Hex(cur), expected)}
	}
	return nil
}

type runArgs struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd"`
}

var runOutput = json.RawMessage(`{"type":"object","required":["exit_code","stdout","stderr","duration_ms","truncated"],"properties":{
	"command":{"type":"string"},"exit_code":{"type":"integer"},"stdout":{"type":"string"},"stderr":{"type":"string"},
	"duration_ms":{"type":"integer"},"truncated":{"type":"boolean"},"timed_out":{"type":"boolean"},"passed":{"type":"boolean"}}}`)

func (t *tools) argv(command string) ([]string, error) {
	argv, err := workspace.SplitCommand(command)
	if err != nil {
		return nil, &kernel.Error{Kind: "guard", Code: kernel.CodeInvalidArguments, Message: "command: " + err.Error()}
	}
	if workspace.IsShell(argv) && !t.opts.AllowShell {
		return nil, &kernel.Error{Kind: "policy", Code: kernel.CodePolicyDenied, Message: fmt.Sprintf("%s is a shell; policy execution.allowShell is off, so run the program directly", argv[0])}
	}
	return argv, nil
}

func (t *tools) assessRun(name, command, cwd string) (kernel.Assessment, error) {
	if _, err := t.argv(command); err != nil {
		return kernel.Assessment{}, err
	}
	if cwd != "" {
		if _, err := t.ws.Resolve(cwd); err != nil {
			return kernel.Assessment{}, err
		}
	}
	_, names := t.ws.Env()
	return kernel.Assessment{Command: command, Cwd: cwd, EnvVars: names, Timeout: t.opts.Timeouts[name].String()}, nil
}

func (t *tools) run(ctx context.Context, env kernel.Env, name, command, cwd string) (map[string]any, error) {
	argv, err := t.argv(command)
	if err != nil {
		return nil, err
	}
	spec := workspace.RunSpec{Argv: argv, Cwd: cwd, MaxOutput: env.Limits.MaxStdout, Timeout: t.opts.Timeouts[name]}
	res, err := t.ws.Run(ctx, spec)
	if err != nil {
		return nil, err
	}
	return map[string]any{"command": command, "exit_code": res.ExitCode, "stdout": env.Redact(res.Stdout), "stderr": env.Redact(res.Stderr), "duration_ms": res.DurationMS, "truncated": res.Truncated, "timed_out": res.TimedOut}, nil
}

func (t *tools) process() kernel.ToolDef {
	return kernel.ToolDef{
		Name: "process.run", Description: "Run a command (argv split like a shell, but no shell: no pipes, globs or variables) in the repository.", Category: kernel.CategoryExec,
		Input: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["command"],"properties":{
			"command":{"type":"string","minLength":1},"cwd":{"type":"string","minLength":1}}}`),
		Output: runOutput,
		Assess: func(ctx context.Context, env kernel.Env, args json.RawMessage) (kernel.Assessment, error) {
			var a runArgs
			if err := decode(args, &a); err != nil {
				return kernel.Assessment{}, err
			}
			return t.assessRun("process.run", a.Command, a.Cwd)
		},
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			var a runArgs
			if err := decode(args, &a); err != nil {
				return nil, err
			}
			return t.run(ctx, env, "process.run", a.Command, a.Cwd)
		},
	}
}

// projectConfig is .agent/config.yaml.
type projectConfig struct {
	Test string `yaml:"test"`
	Lint string `yaml:"lint"`
	// Setup are the setup phase's commands (docs/project-config.md): nil
	// (not given) detects them, an empty list is none.
	Setup []string `yaml:"setup"`
}

// Setup is the setup phase of a workspace: the commands run with the
// package registries reachable before the agent phase
// (docs/project-config.md).
type Setup struct {
	Commands []string
	// Detected: from the project's files, as .agent/config.yaml has no
	// setup:.
	Detected bool
}

// SetupCommands returns the setup phase's commands: .agent/config.yaml
// `setup:` (an empty list is none), else detected: `go mod download` for
// a go.mod that requires modules and has no vendor directory, `npm ci
// --ignore-scripts` for a package-lock.json (or npm-shrinkwrap.json).
// Nothing is detected without a lock file: `npm install` would resolve
// versions anew and write one into the worktree.
func SetupCommands(ws *workspace.Root) (Setup, error) {
	t := &tools{ws: ws}
	c, err := t.config()
	if err != nil {
		return Setup{}, err
	}
	if c.Setup != nil {
		for i, cmd := range c.Setup {
			if strings.TrimSpace(cmd) == "" {
				return Setup{}, &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: fmt.Sprintf(".agent/config.yaml: setup[%d] is empty", i)}
			}
		}
		return Setup{Commands: append([]string{}, c.Setup...)}, nil
	}
	out := Setup{Detected: true}
	if b, err := ws.ReadFile("go.mod"); err == nil && requiresModules(b) && !t.exists("vendor/modules.txt") {
		out.Commands = append(out.Commands, "go mod download")
	}
	if t.exists("package-lock.json") || t.exists("npm-shrinkwrap.json") {
		out.Commands = append(out.Commands, "npm ci --ignore-scripts")
	}
	return out, nil
}

// requiresModules reports whether a go.mod has a require directive.
func requiresModules(gomod []byte) bool {
	for _, l := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "require" || strings.HasPrefix(f[0], "require(")) {
			return true
		}
	}
	return false
}

// SetupArgv splits a setup command as test.run splits its command: no
// shell unless allowShell (policy execution.allowShell).
func SetupArgv(command string, allowShell bool) ([]string, error) {
	t := &tools{opts: Options{AllowShell: allowShell}}
	return t.argv(command)
}

func (t *tools) config() (projectConfig, error) {
	var c projectConfig
	b, err := t.ws.ReadFile(".agent/config.yaml")
	if err != nil {
		return c, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: ".agent/config.yaml: " + err.Error()}
	}
	return c, nil
}

func (t *tools) exists(p string) bool { _, err := t.ws.Stat(p); return err == nil }

var nameRe = func(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_-./^$|", c)) {
			return false
		}
	}
	return s != ""
}

// TestCommand returns the test command for the workspace: .agent/config.yaml
// `test:`, else detected from go.mod, package.json or a Python project.
func (t *tools) testCommand(name string) (string, error) {
	if name != "" && !nameRe(name) {
		return "", &kernel.Error{Kind: "guard", Code: kernel.CodeInvalidArguments, Message: "name may contain only letters, digits and _-./^$|"}
	}
	c, err := t.config()
	if err != nil {
		return "", err
	}
	switch {
	case c.Test != "":
		if name != "" {
			return c.Test + " " + name, nil
		}
		return c.Test, nil
	case t.exists("go.mod"):
		if name != "" {
			return "go test -count=1 -run " + name + " ./...", nil
		}
		return "go test -count=1 ./...", nil
	case t.exists("package.json"):
		if name != "" {
			return "npm test -- " + name, nil
		}
		return "npm test", nil
	case t.exists("pyproject.toml") || t.exists("pytest.ini") || t.exists("setup.py"):
		if name != "" {
			return t.python() + " -m pytest -k " + name, nil
		}
		return t.python() + " -m pytest", nil
	}
	return "", &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: "no test command: add `test: <command>` to .agent/config.yaml"}
}

// python is the interpreter a detected Python command names: python
// where the commands' PATH has one, else python3 (Debian and Ubuntu have
// no python unless python-is-python3 is installed).
func (t *tools) python() string {
	path := ""
	if env, _ := t.ws.Env(); env != nil {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				path = v
			}
		}
	}
	found := func(name string) bool {
		for _, dir := range filepath.SplitList(path) {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return true
			}
		}
		return false
	}
	if !found("python") && found("python3") {
		return "python3"
	}
	return "python"
}

func (t *tools) lintCommand() (string, error) {
	c, err := t.config()
	if err != nil {
		return "", err
	}
	switch {
	case c.Lint != "":
		return c.Lint, nil
	case t.exists("go.mod"):
		return "go vet ./...", nil
	case t.exists("package.json"):
		return "npm run lint", nil
	case t.exists("pyproject.toml") || t.exists("setup.py"):
		return t.python() + " -m ruff check .", nil
	}
	return "", &kernel.Error{Kind: "runtime", Code: kernel.CodeToolRuntimeError, Message: "no lint command: add `lint: <command>` to .agent/config.yaml"}
}

func (t *tools) test() kernel.ToolDef {
	return kernel.ToolDef{
		Name: "test.run", Description: "Run the project's tests (from .agent/config.yaml or detected); name narrows to matching tests.", Category: kernel.CategoryExec,
		Input:  json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"name":{"type":"string","minLength":1,"maxLength":200}}}`),
		Output: runOutput,
		Assess: func(ctx context.Context, env kernel.Env, args json.RawMessage) (kernel.Assessment, error) {
			var a struct{ Name string }
			if err := decode(args, &a); err != nil {
				return kernel.Assessment{}, err
			}
			cmd, err := t.testCommand(a.Name)
			if err != nil {
				return kernel.Assessment{}, err
			}
			return t.assessRun("test.run", cmd, "")
		},
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			var a struct{ Name string }
			if err := decode(args, &a); err != nil {
				return nil, err
			}
			cmd, err := t.testCommand(a.Name)
			if err != nil {
				return nil, err
			}
			res, err := t.run(ctx, env, "test.run", cmd, "")
			if err == nil {
				res["passed"] = res["exit_code"] == 0
			}
			return res, err
		},
	}
}

func (t *tools) lint() kernel.ToolDef {
	return kernel.ToolDef{
		Name: "lint.run", Description: "Run the project's linter (from .agent/config.yaml or detected).", Category: kernel.CategoryExec,
		Input:  json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{}}`),
		Output: runOutput,
		Assess: func(ctx context.Context, env kernel.Env, args json.RawMessage) (kernel.Assessment, error) {
			cmd, err := t.lintCommand()
			if err != nil {
				return kernel.Assessment{}, err
			}
			return t.assessRun("lint.run", cmd, "")
		},
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			cmd, err := t.lintCommand()
			if err != nil {
				return nil, err
			}
			res, err := t.run(ctx, env, "lint.run", cmd, "")
			if err == nil {
				res["passed"] = res["exit_code"] == 0
			}
			return res, err
		},
	}
}
