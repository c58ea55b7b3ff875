// Package exchange is test support for the provider adapters: it serves a
// recorded HTTP exchange (testdata/*.json) from an httptest server and
// checks every request the adapter sends against the recorded expectation
// (method, path, query, headers, and the body as a JSON subset).
//
// An exchange file:
//
//	{
//	  "request": {
//	    "method": "POST", "path": "/v1/chat/completions",
//	    "headers": {"Authorization": "Bearer test-key"},
//	    "body": {"model": "gpt-4o", "tools": [{"type": "function"}]}
//	  },
//	  "responses": [
//	    {"status": 429, "headers": {"Retry-After": "7"}, "body": {"error": {}}},
//	    {"status": 200, "body_file": "text.response.json"}
//	  ]
//	}
//
// The n-th request gets the n-th response (the last one repeats). In the
// expected body every object key must be present with a matching value;
// arrays must match element by element and in length; null means "absent".
package exchange

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// File is one recorded exchange.
type File struct {
	Request   Expect  `json:"request"`
	Responses []Reply `json:"responses"`
}

// Expect is what every request must look like.
type Expect struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Query   map[string]string `json:"query,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    json.RawMessage   `json:"body,omitempty"`
}

// Reply is one recorded response.
type Reply struct {
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers,omitempty"`
	Body     json.RawMessage   `json:"body,omitempty"`      // JSON, written as recorded
	BodyFile string            `json:"body_file,omitempty"` // relative to the exchange file
}

// Server serves one exchange.
type Server struct {
	URL string

	mu     sync.Mutex
	bodies []map[string]any
}

// Load reads an exchange file.
func Load(t *testing.T, path string) File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f File
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(f.Responses) == 0 {
		t.Fatalf("%s: no responses", path)
	}
	return f
}

// Serve starts a server for the exchange in path; it stops with the test.
func Serve(t *testing.T, path string) *Server {
	t.Helper()
	return ServeFile(t, Load(t, path), path)
}

// ServeFile serves a loaded (possibly adjusted) exchange; path names it in
// messages and anchors its body_file references.
func ServeFile(t *testing.T, f File, path string) *Server {
	t.Helper()
	var want any
	if len(f.Request.Body) > 0 {
		if err := json.Unmarshal(f.Request.Body, &want); err != nil {
			t.Fatalf("%s: request.body: %v", path, err)
		}
	}
	bodies := make([][]byte, len(f.Responses))
	for i, r := range f.Responses {
		switch {
		case r.BodyFile != "":
			b, err := os.ReadFile(filepath.Join(filepath.Dir(path), r.BodyFile))
			if err != nil {
				t.Fatal(err)
			}
			bodies[i] = b
		default:
			bodies[i] = r.Body
		}
	}
	s := &Server{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, nil)
		s.mu.Unlock()
		raw, _ := io.ReadAll(r.Body)
		var got map[string]any
		problems := check(f.Request, r, raw, want, &got)
		s.mu.Lock()
		s.bodies[n] = got
		s.mu.Unlock()
		if len(problems) > 0 {
			t.Errorf("request %d to %s does not match %s:\n  %s", n+1, r.URL.Path, filepath.Base(path), strings.Join(problems, "\n  "))
			http.Error(w, `{"error":{"message":"request did not match the recording"}}`, http.StatusTeapot)
			return
		}
		rep := f.Responses[min(n, len(f.Responses)-1)]
		body := bodies[min(n, len(f.Responses)-1)]
		if rep.Headers["Content-Type"] == "" && json.Valid(body) {
			w.Header().Set("Content-Type", "application/json")
		}
		for k, v := range rep.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.Status)
		_, _ = w.Write(body)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Requests returns how many requests arrived.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// Body returns the decoded JSON body of request n (0-based).
func (s *Server) Body(n int) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n < 0 || n >= len(s.bodies) {
		return nil
	}
	return s.bodies[n]
}

func check(e Expect, r *http.Request, raw []byte, want any, got *map[string]any) []string {
	var problems []string
	if e.Method != "" && r.Method != e.Method {
		problems = append(problems, fmt.Sprintf("method %s, want %s", r.Method, e.Method))
	}
	if e.Path != "" && r.URL.Path != e.Path {
		problems = append(problems, fmt.Sprintf("path %s, want %s", r.URL.Path, e.Path))
	}
	for _, k := range sortedKeys(e.Query) {
		if g := r.URL.Query().Get(k); g != e.Query[k] {
			problems = append(problems, fmt.Sprintf("query %s=%q, want %q", k, g, e.Query[k]))
		}
	}
	for _, k := range sortedKeys(e.Headers) {
		if g := r.Header.Get(k); g != e.Headers[k] {
			problems = append(problems, fmt.Sprintf("header %s: %q, want %q", k, g, e.Headers[k]))
		}
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, got); err != nil {
			problems = append(problems, "body is not a JSON object: "+err.Error())
			return problems
		}
	}
	if want != nil {
		var g any
		if *got != nil {
			g = *got
		}
		problems = append(problems, Match(want, g, "body")...)
	}
	return problems
}

// Match compares got against the expected subset want and returns one line
// per difference.
func Match(want, got any, at string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %s, want an object", at, show(got))}
		}
		var out []string
		for _, k := range sortedKeys(w) {
			gv, present := g[k]
			if w[k] == nil {
				if present && gv != nil {
					out = append(out, fmt.Sprintf("%s.%s: got %s, want it absent", at, k, show(gv)))
				}
				continue
			}
			if !present {
				out = append(out, fmt.Sprintf("%s.%s: missing, want %s", at, k, show(w[k])))
				continue
			}
			out = append(out, Match(w[k], gv, at+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %s, want %s", at, show(got), show(want))}
		}
		var out []string
		for i := range w {
			out = append(out, Match(w[i], g[i], fmt.Sprintf("%s[%d]", at, i))...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: got %s, want %s", at, show(got), show(want))}
		}
		return nil
	}
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Waits records retry waits instead of sleeping; its Sleep is an adapter's
// Options.Sleep.
type Waits struct {
	mu sync.Mutex
	d  []time.Duration
}

// Sleep records d and returns at once (or ctx's error if it has ended).
func (w *Waits) Sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return ctx.Err()
}

// Got returns the recorded waits.
func (w *Waits) Got() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}
