package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"runtime"
	"sort"
	"sync"

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
)

func (t *tools) search() kernel.ToolDef {
	return kernel.ToolDef{
		Name: "repo.search", Description: "Search the repository's files (respects .gitignore, skips binary files) for a literal string, or a regular expression with regex: true; globs narrow the files.", Category: kernel.CategoryRead,
		Input: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["query"],"properties":{
			"query":{"type":"string","minLength":1,"maxLength":1000},
			"globs":{"type":"array","items":{"type":"string","minLength":1},"maxItems":20},
			"regex":{"type":"boolean"},
			"max_results":{"type":"integer","minimum":1,"maximum":2000}}}`),
		Output: json.RawMessage(`{"type":"object","required":["matches","truncated","files_scanned"],"properties":{
			"matches":{"type":"array","items":{"type":"object","required":["path","line","text"]}},"truncated":{"type":"boolean"},"files_scanned":{"type":"integer"}}}`),
		Assess: func(ctx context.Context, env kernel.Env, args json.RawMessage) (kernel.Assessment, error) {
			_, err := parseSearch(args)
			return kernel.Assessment{}, err
		},
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			q, err := parseSearch(args)
			if err != nil {
				return nil, err
			}
			matches, truncated, scanned, err := t.Search(ctx, q)
			if err != nil {
				return nil, err
			}
			for i := range matches {
				matches[i].Text = env.Redact(matches[i].Text)
			}
			return map[string]any{"matches": matches, "truncated": truncated, "files_scanned": scanned}, nil
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
// and line, at most q.Max of them.
func (t *tools) Search(ctx context.Context, q Query) ([]Match, bool, int, error) {
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
				b, err := f.Read()
				f.Release()
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
		walkErr = t.ws.WalkFiles(ctx, func(f *workspace.File) error {
			if len(q.Globs) > 0 && !globMatch(q.Globs, f.Rel) {
				f.Release()
				return nil
			}
			scanned++
			files <- f
			return nil
		})
		close(files)
		wg.Wait()
		close(results)
	}()
	var all []Match
	for r := range results {
		all = append(all, r.matches...)
	}
	if walkErr != nil {
		return nil, false, scanned, walkErr
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Path != all[j].Path {
			return all[i].Path < all[j].Path
		}
		return all[i].Line < all[j].Line
	})
	truncated := len(all) > q.Max
	if truncated {
		all = all[:q.Max]
	}
	return all, truncated, scanned, nil
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
	sc.Buffer(make([]byte, 64<<10), 4<<20)
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
