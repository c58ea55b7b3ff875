package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"regexp"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/bmatcuk/doublestar/v4"
)

// Match is one search hit.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

const (
	defaultMaxResults = 200
	maxLineShown      = 300
	// searchFileCap is the most repo.search reads of one file: a larger
	// file is searched in its first searchFileCap bytes (counted in
	// files_cut), so the parallel workers hold at most this much each.
	searchFileCap = 4 << 20
)

func (t *tools) search() kernel.ToolDef {
	return kernel.ToolDef{
		Name: "repo.search", Description: "Search the repository's files (respects .gitignore, skips binary files and anything that is not a regular file, counted in files_skipped) for a literal string, or a regular expression with regex: true; globs narrow the files. Of a file over 4 MiB only the first 4 MiB are searched (files_cut); the matches are cut to the output limit (truncated).", Category: kernel.CategoryRead,
		Input: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["query"],"properties":{
			"query":{"type":"string","minLength":1,"maxLength":1000},
			"globs":{"type":"array","items":{"type":"string","minLength":1},"maxItems":20},
			"regex":{"type":"boolean"},
			"max_results":{"type":"integer","minimum":1,"maximum":2000}}}`),
		Output: json.RawMessage(`{"type":"object","required":["matches","truncated","files_scanned"],"properties":{
			"matches":{"type":"array","items":{"type":"object","required":["path","line","text"],"properties":{"path":{"type":"string"},"line":{"type":"integer","minimum":1},"text":{"type":"string"}}}},
			"truncated":{"type":"boolean"},"files_scanned":{"type":"integer","minimum":0},"files_skipped":{"type":"integer","minimum":0},"files_cut":{"type":"integer","minimum":0}}}`),
		Assess: func(ctx context.Context, env kernel.Env, args json.RawMessage) (kernel.Assessment, error) {
			_, err := parseSearch(args)
			return kernel.Assessment{}, err
		},
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			q, err := parseSearch(args)
			if err != nil {
				return nil, err
			}
			r, err := t.searchFiles(ctx, q)
			if err != nil {
				return nil, err
			}
			// The output limit of the exec tools bounds the matches too.
			size, max := 0, outputLimit(env)
			for i := range r.Matches {
				r.Matches[i].Text = env.Redact(r.Matches[i].Text)
				if size += len(r.Matches[i].Path) + len(r.Matches[i].Text); size > max && i > 0 {
					r.Matches, r.Truncated = r.Matches[:i], true
					break
				}
			}
			return map[string]any{"matches": r.Matches, "truncated": r.Truncated, "files_scanned": r.Scanned, "files_skipped": r.Skipped, "files_cut": r.Cut}, nil
		},
	}
}

// Query is a parsed repo.search call.
type Query struct {
	Literal []byte
	Re      *regexp.Regexp
	Globs   []string
	Max     int
}

func parseSearch(args json.RawMessage) (Query, error) {
	var a struct {
		Query      string   `json:"query"`
		Globs      []string `json:"globs"`
		Regex      bool     `json:"regex"`
		MaxResults int      `json:"max_results"`
	}
	if err := decode(args, &a); err != nil {
		return Query{}, err
	}
	q := Query{Globs: a.Globs, Max: a.MaxResults}
	if q.Max == 0 {
		q.Max = defaultMaxResults
	}
	for _, g := range a.Globs {
		if !doublestar.ValidatePattern(g) {
			return q, &kernel.Error{Kind: "guard", Code: kernel.CodeInvalidArguments, Message: "invalid glob " + g}
		}
	}
	if a.Regex {
		re, err := regexp.Compile(a.Query)
		if err != nil {
			return q, &kernel.Error{Kind: "guard", Code: kernel.CodeInvalidArguments, Message: "query: " + err.Error()}
		}
		q.Re = re
	} else {
		q.Literal = []byte(a.Query)
	}
	return q, nil
}

// Search scans the workspace in parallel and returns matches sorted by path
// and line, at most q.Max of them (never nil).
func (t *tools) Search(ctx context.Context, q Query) ([]Match, bool, int, error) {
	r, err := t.searchFiles(ctx, q)
	return r.Matches, r.Truncated, r.Scanned, err
}

// SearchResult is a search's matches and counts.
type SearchResult struct {
	Matches   []Match // sorted by path and line; never nil
	Truncated bool    // more than Query.Max matches
	Scanned   int     // regular files searched
	Skipped   int     // entries that are not regular files, not searched
	Cut       int     // files over searchFileCap: only their start searched
}

func (t *tools) searchFiles(ctx context.Context, q Query) (SearchResult, error) {
	var skipped, cut atomic.Int64
	files := make(chan *workspace.File, 256)
	type result struct {
		path    string
		matches []Match
	}
	results := make(chan result, 256)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range files {
				b, err := readPrefix(f, &cut)
				f.Release()
				if errors.Is(err, workspace.ErrNotRegular) {
					skipped.Add(1) // swapped since the walk listed it
				}
				if err != nil {
					continue
				}
				if m := searchContent(f.Rel, b, q); len(m) > 0 {
					results <- result{f.Rel, m}
				}
			}
		}()
	}
	scanned := 0
	var walkErr error
	go func() {
		walkErr = t.ws.WalkFilesSkipped(ctx, func(f *workspace.File) error {
			if len(q.Globs) > 0 && !globMatch(q.Globs, f.Rel) {
				f.Release()
				return nil
			}
			scanned++
			files <- f
			return nil
		}, func(rel string, _ fs.FileMode) {
			if len(q.Globs) == 0 || globMatch(q.Globs, rel) {
				skipped.Add(1)
			}
		})
		close(files)
		wg.Wait()
		close(results)
	}()
	all := []Match{}
	for r := range results {
		all = append(all, r.matches...)
	}
	res := SearchResult{Scanned: scanned, Skipped: int(skipped.Load()), Cut: int(cut.Load())}
	if walkErr != nil {
		res.Matches = []Match{}
		return res, walkErr
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Path != all[j].Path {
			return all[i].Path < all[j].Path
		}
		return all[i].Line < all[j].Line
	})
	res.Truncated = len(all) > q.Max
	if res.Truncated {
		all = all[:q.Max]
	}
	res.Matches = all
	return res, nil
}

// readPrefix reads a walked file, at most searchFileCap bytes of it (cut
// back to its last whole line; counted in cut): the file is opened like
// every workspace read (workspace.Root.Open), so a FIFO is refused, not
// waited on.
func readPrefix(f *workspace.File, cut *atomic.Int64) ([]byte, error) {
	r, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, full, err := r.ReadPrefix(searchFileCap)
	if err != nil {
		return nil, err
	}
	if !full {
		cut.Add(1)
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		}
	}
	return b, nil
}

func globMatch(globs []string, p string) bool {
	include, any := false, false
	for _, g := range globs {
		if neg := len(g) > 0 && g[0] == '!'; neg {
			if ok, _ := doublestar.Match(g[1:], p); ok {
				return false
			}
			continue
		}
		any = true
		if ok, _ := doublestar.Match(g, p); ok {
			include = true
		}
	}
	return include || !any
}

// searchContent finds q's matches in one file's content; binary files
// (a NUL byte in the first 8000 bytes, git's heuristic) have none.
func searchContent(p string, b []byte, q Query) []Match {
	if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
		return nil
	}
	if q.Re == nil && !bytes.Contains(b, q.Literal) {
		return nil
	}
	var out []Match
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), searchFileCap+1)
	for n := 1; sc.Scan(); n++ {
		l := sc.Bytes()
		if (q.Re != nil && q.Re.Match(l)) || (q.Re == nil && bytes.Contains(l, q.Literal)) {
			text := string(l)
			if len(text) > maxLineShown {
				text = text[:maxLineShown] + "…"
			}
			out = append(out, Match{Path: p, Line: n, Text: text})
			if len(out) >= 1000 {
				break
			}
		}
	}
	return out
}
