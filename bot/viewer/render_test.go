package viewer

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	xhtml "golang.org/x/net/html"
)

// hostileSession is a session whose model output, tool output and prompt
// try to break out of the page.
func hostileSession(t testing.TB) []event.Event {
	t.Helper()
	s := store.NewMemory(newSealer(t))
	run := "run-h"
	huge := strings.Repeat("A", 300_000)
	invalid := "bad \xff\xfe utf8 \xc3"
	appendTo(t, s, "h",
		event.Draft{RunID: run, Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "<script>alert('prompt')</script>"}},
		event.Draft{RunID: run, Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": run, "prompt": "<script>alert('prompt')</script>", "trigger": map[string]any{"repo": "octo/app"}}},
		event.Draft{RunID: run, Type: event.LLMRequest, Actor: "worker", Payload: map[string]any{"attempt": 1, "request": map[string]any{"model": "m", "schema_version": "v1", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, "role": "worker"}},
		event.Draft{RunID: run, Type: event.LLMResponse, Actor: "worker", Payload: map[string]any{"role": "worker", "response": map[string]any{"model": "<img src=x onerror=alert(1)>", "finish_reason": "stop", "schema_version": "v1", "text": "[click](javascript:alert(1)) <a href=\"javascript:alert(2)\">x</a> " + invalid, "tool_calls": []any{}, "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}}},
		event.Draft{RunID: run, Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"args": map[string]any{"path": "</pre><script>alert(3)</script>"}, "call_id": "c1", "caller": "worker", "tool": "repo.read"}},
		event.Draft{RunID: run, Type: event.ToolResult, Actor: "kernel", Payload: map[string]any{"call_id": "c1", "ok": true, "tool": "repo.read", "result": map[string]any{"content": huge}}},
		event.Draft{RunID: run, Type: event.WorkerReport, Actor: "worker", Payload: map[string]any{"output": "</textarea><script>alert(4)</script>" + invalid, "schema_version": "v1", "steps_completed": []string{}, "tool_calls_made": []string{}}},
		event.Draft{RunID: run, Type: event.ApprovalRequested, Actor: "kernel", Payload: map[string]any{"approval_id": "ap-1", "tool": "repo.patch", "digest": digest, "preview": map[string]any{"diff": "+<script>alert(5)</script>\n-" + invalid + "\n+" + huge[:5000]}}},
		event.Draft{RunID: run, Type: event.RunPaused, Actor: "runtime", Payload: map[string]any{"reason": "approval", "approval_ids": []string{"ap-1"}}},
	)
	evs, err := s.Read(context.Background(), "h", 1)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestHostileTextIsEscaped(t *testing.T) {
	evs := hostileSession(t)
	s, err := Build("h", evs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	html := string(runPage(page{Title: "x", S: s, Live: true, CanApprove: true, CSRF: "tok", Login: "wes"}))
	for _, bad := range []string{"<script>alert", "<img src=x", `href="javascript:`, "</pre><script>", "</textarea><script>"} {
		if strings.Contains(html, bad) {
			i := strings.Index(html, bad)
			t.Errorf("the page contains %q unescaped: …%s…", bad, html[max(0, i-80):min(len(html), i+80)])
		}
	}
	// The only scripts are the embedded file; no inline handlers.
	if n := strings.Count(html, "<script"); n != 1 || !strings.Contains(html, `<script src="/assets/viewer.js" defer></script>`) {
		t.Errorf("%d <script> tags, want only the embedded viewer.js", n)
	}
	if strings.Contains(html, " style=") || strings.Contains(html, "<style") {
		t.Error("inline style: the CSP forbids it")
	}
	if !strings.Contains(html, "&lt;script&gt;alert(&#39;prompt&#39;)&lt;/script&gt;") {
		t.Error("the prompt is not shown escaped")
	}
	// Invalid UTF-8 is replaced, never passed through.
	if !bytes.Equal([]byte(strings.ToValidUTF8(html, "?")), []byte(html)) {
		t.Error("the page is not valid UTF-8")
	}
	// A 300 kB tool result is bounded on the page and says so.
	if len(html) > 400_000 {
		t.Errorf("the page is %d bytes: a huge payload is not bounded", len(html))
	}
	if !strings.Contains(html, "more bytes: see the event stream or events.jsonl") {
		t.Error("a truncated payload does not say so")
	}
	// Every line of text (a diff's lines are block spans) is bounded.
	for _, line := range strings.Split(strings.NewReplacer("</span>", "\n", "</td>", "\n").Replace(html), "\n") {
		if len(line) > maxLine+200 {
			t.Errorf("a line of %d bytes reaches the page", len(line))
			break
		}
	}
}

func TestTimelineAndCost(t *testing.T) {
	evs := hostileSession(t)
	s, err := Build("h", evs, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Timeline.Lanes) != 1 || s.Timeline.Lanes[0].Name != "worker" {
		t.Fatalf("lanes = %+v, want one worker lane", s.Timeline.Lanes)
	}
	bars := s.Timeline.Lanes[0].Bars
	if len(bars) != 2 || bars[0].Kind != "llm" || bars[1].Kind != "tool" || bars[1].Outcome != "ok" {
		t.Fatalf("bars = %+v, want a model call then a tool call", bars)
	}
	for _, b := range bars {
		if b.X < labelW || b.X+b.W > chartW+0.01 || b.W < minBarW {
			t.Errorf("bar %+v outside the chart", b)
		}
	}
	if len(s.Costs.Roles) != 1 || s.Costs.Roles[0].InputTokens != 10 || s.Costs.Roles[0].OutputTokens != 5 {
		t.Errorf("costs = %+v", s.Costs.Roles)
	}
	if len(s.Pending) != 1 || len(s.Pending[0].Diff) < 2 || s.Pending[0].Diff[0].Kind != "add" || s.Pending[0].Diff[1].Kind != "del" {
		t.Errorf("pending = %+v", s.Pending)
	}
}

func TestRecordedSessionRenders(t *testing.T) {
	f, err := readEvents("../../testdata/sessions/approval.events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build("recorded-approval", f, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, l := range s.Timeline.Lanes {
		names = append(names, l.Name)
	}
	if got := strings.Join(names, ","); got != "lead,planner,worker,reviewer" {
		t.Errorf("lanes = %s, want lead,planner,worker,reviewer", got)
	}
	if s.State != "completed" || s.Terminal == nil || len(s.Resolved) != 1 {
		t.Errorf("state %s, terminal %v, resolved %v", s.State, s.Terminal, s.Resolved)
	}
}

func TestSplitDiff(t *testing.T) {
	rows := split(diffLines("--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n keep\n-old1\n-old2\n+new1\n tail\n"))
	var got []string
	for _, r := range rows {
		got = append(got, r.Kind+"|"+r.Left.Kind+":"+r.Left.Text+"|"+r.Right.Kind+":"+r.Right.Text)
	}
	want := []string{
		"file|file:--- a/x|:", "file|file:+++ b/x|:", "hunk|hunk:@@ -1,3 +1,3 @@|:",
		"|ctx:keep|ctx:keep", "|del:old1|add:new1", "|del:old2|:", "|ctx:tail|ctx:tail",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("split =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// hostile is put in every string a page shows: it tries to close the
// element and the attribute it lands in, open a script, an image with a
// handler and a javascript: link.
const hostile = "\"'></textarea></pre></title></svg><script>alert(1)</script><img src=x onerror=alert(2)><a href=\"javascript:alert(3)\">j</a>javascript:alert(4)\x00\xff"

// fillHostile sets every string reachable from v (fields, one element of
// every slice, every pointer) to hostile, every number to 1 and every bool
// to on, so that a slot a page gains later is covered without editing
// this test.
func fillHostile(v reflect.Value, on bool) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(hostile)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Float64:
		v.SetFloat(1)
	case reflect.Bool:
		v.SetBool(on)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillHostile(v.Elem(), on)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fillHostile(v.Index(i), on)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fillHostile(f, on)
			}
		}
	}
}

// TestEverySlotIsInert renders every page and part with hostile text in
// every dynamic slot (titles, prompts, tool arguments, reasons, diffs,
// ids that land in URLs and attributes) and parses the result as a
// browser would: the only elements and attributes are the page's own, the
// only script is viewer.js, every link stays on the site, and the hostile
// text is there, as text.
func TestEverySlotIsInert(t *testing.T) {
	for _, on := range []bool{true, false} {
		var d page
		fillHostile(reflect.ValueOf(&d).Elem(), on)
		// Both kinds of side-by-side row, and a persona that reviewed.
		d.S.Pending[1].Split = []SplitRow{{Kind: hostile, Left: DiffLine{Kind: "del", Text: hostile}}, {Left: DiffLine{Kind: "del", Text: hostile}, Right: DiffLine{Kind: "add", Text: hostile}}}
		d.S.Evidence.Review.Personas[1].Status = "ran"
		docs := map[string]string{
			"run":   string(runPage(d)),
			"list":  string(listPage(d)),
			"error": string(errorPage(d)),
		}
		for _, p := range parts {
			var w htmlWriter
			p.render(&w, d)
			docs["part "+p.name] = string(w.b)
		}
		for name, doc := range docs {
			checkInert(t, fmt.Sprintf("%s (bools %v)", name, on), doc)
		}
	}
}

func checkInert(t *testing.T, name, doc string) {
	t.Helper()
	if !utf8.ValidString(doc) || strings.ContainsRune(doc, 0) {
		t.Errorf("%s: not valid UTF-8 or holds NUL", name)
	}
	z := xhtml.NewTokenizer(strings.NewReader(doc))
	texts := 0
	for {
		tt := z.Next()
		if tt == xhtml.ErrorToken {
			if z.Err() != io.EOF {
				t.Errorf("%s: %v", name, z.Err())
			}
			break
		}
		tok := z.Token()
		switch tt {
		case xhtml.TextToken:
			if strings.Contains(tok.Data, "<script>alert(1)") {
				texts++
			}
		case xhtml.StartTagToken, xhtml.SelfClosingTagToken:
			switch tok.Data {
			case "img", "iframe", "object", "embed", "style", "base", "textarea":
				t.Errorf("%s: a <%s> element reached the page", name, tok.Data)
			case "script":
				if len(tok.Attr) != 2 || tok.Attr[0].Val != "/assets/viewer.js" {
					t.Errorf("%s: a script other than viewer.js: %v", name, tok)
				}
			}
			for _, a := range tok.Attr {
				if strings.HasPrefix(a.Key, "on") || a.Key == "style" || a.Key == "src" && tok.Data != "script" {
					t.Errorf("%s: attribute %s on <%s>", name, a.Key, tok.Data)
				}
				if a.Key == "href" || a.Key == "action" {
					if !strings.HasPrefix(a.Val, "/") && !strings.HasPrefix(a.Val, "#") || strings.HasPrefix(a.Val, "//") {
						t.Errorf("%s: <%s %s=%q> leaves the site", name, tok.Data, a.Key, a.Val)
					}
					if strings.ContainsAny(a.Val, "<>\"' ") {
						t.Errorf("%s: <%s %s=%q> holds unencoded characters", name, tok.Data, a.Key, a.Val)
					}
				}
				if strings.Contains(a.Val, "<script>alert(1)") {
					texts++
				}
			}
		}
	}
	if texts == 0 {
		t.Errorf("%s: the hostile text is not shown at all (as text)", name)
	}
}

// TestURLs: only http(s) URLs and same-site relative references are
// written; anything else becomes a fragment that goes nowhere.
func TestURLs(t *testing.T) {
	for in, want := range map[string]string{
		"/runs/a%20b?all=1#ev-2":            "/runs/a%20b?all=1#ev-2",
		"/runs?cursor=a%3D&state=paused":    "/runs?cursor=a%3D&amp;state=paused",
		"#ev-3":                             "#ev-3",
		"x/y":                               "x/y",
		"https://github.com/o/r/pull/1":     "https://github.com/o/r/pull/1",
		"HTTP://example.com/a b\"<>":        "HTTP://example.com/a%20b%22%3C%3E",
		"/runs/é":                           "/runs/%C3%A9",
		"javascript:alert(1)":               "#unsafe-url",
		"JaVaScRiPt:alert(1)":               "#unsafe-url",
		" javascript:alert(1)":              "#unsafe-url",
		"java\tscript:alert(1)":             "#unsafe-url",
		"data:text/html,<script>x</script>": "#unsafe-url",
		"vbscript:x":                        "#unsafe-url",
		"//evil.example/x":                  "#unsafe-url",
		"/\\evil.example/x":                 "#unsafe-url",
		"http:/no-host":                     "#unsafe-url",
		"mailto:a@b":                        "#unsafe-url",
	} {
		var w htmlWriter
		w.url(in)
		if string(w.b) != want {
			t.Errorf("url(%q) = %q, want %q", in, w.b, want)
		}
	}
}

// TestMarkupIsConstant: the pages' code writes markup only from string
// literals (htmlWriter.m); nothing converts a string to markup, and only
// the writer's own methods touch its buffer. So text from a log or a user
// reaches a page only escaped.
func TestMarkupIsConstant(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	writers := map[string]bool{"m": true, "text": true, "int": true, "f1": true, "bool": true}
	calls := 0
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, isFunc := decl.(*ast.FuncDecl)
			primitive := isFunc && fn.Recv != nil && writers[fn.Name.Name]
			ast.Inspect(decl, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Ident:
					if n.Name == "markup" {
						// Only its declaration and m's parameter may name it.
						if gd, ok := decl.(*ast.GenDecl); !(ok && gd.Tok == token.TYPE) && !(isFunc && fn.Name.Name == "m") {
							t.Errorf("%s: markup named outside its declaration and htmlWriter.m", fset.Position(n.Pos()))
						}
					}
				case *ast.CallExpr:
					if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "m" && len(n.Args) == 1 {
						calls++
						if lit, ok := n.Args[0].(*ast.BasicLit); !ok || lit.Kind != token.STRING {
							t.Errorf("%s: m given something other than a string literal", fset.Position(n.Pos()))
						}
					}
				case *ast.AssignStmt:
					for _, l := range n.Lhs {
						if sel, ok := l.(*ast.SelectorExpr); ok && sel.Sel.Name == "b" && !primitive {
							t.Errorf("%s: a page's buffer written outside the writer's methods", fset.Position(n.Pos()))
						}
					}
				}
				return true
			})
		}
	}
	if calls < 100 {
		t.Errorf("found %d calls of m: the check does not see the pages", calls)
	}
}
