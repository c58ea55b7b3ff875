package serve_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/mcp/serve"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type recorder struct {
	mu    sync.Mutex
	types []string
}

func (r *recorder) Record(_ context.Context, typ, _ string, _ any, _ string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types = append(r.types, typ)
	return typ, nil
}

func newKernel(t *testing.T) (*kernel.Kernel, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello from the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir, workspace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	k := kernel.New(nil, ws, nil)
	for _, d := range tools.Defs(ws, tools.Options{}) {
		if err := k.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	return k, dir
}

func connect(t *testing.T, s *sdk.Server) *sdk.ClientSession {
	t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func structured(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return m
}

// TestServeThroughTheKernel calls the kernel's tools with the Go SDK's
// client: a read runs, a write returns "approval required" with the
// pending id and is not executed, a bad argument is a tool error, and
// every call is recorded.
func TestServeThroughTheKernel(t *testing.T) {
	k, dir := newKernel(t)
	rec := &recorder{}
	cs := connect(t, serve.New(k, rec, serve.Options{ApproveHint: "agentos tool approve %s --events e.jsonl"}))
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range lt.Tools {
		names[tl.Name] = true
	}
	for _, want := range []string{"repo.read", "repo.search", "repo.patch", "repo.write", "process.run", "test.run"} {
		if !names[want] {
			t.Fatalf("%s not listed: %v", want, names)
		}
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "repo.read", Arguments: map[string]any{"path": "hello.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("repo.read: %+v %v", res, err)
	}
	if !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "hello from the workspace") {
		t.Fatalf("repo.read content: %+v", res.Content[0])
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "repo.write", Arguments: map[string]any{"path": "new.txt", "content": "x", "expected_hash": ""}})
	if err != nil || !res.IsError {
		t.Fatalf("repo.write: %+v %v", res, err)
	}
	doc := structured(t, res)
	id, _ := doc["approval_id"].(string)
	if doc["status"] != "approval_required" || !strings.HasPrefix(id, "ap-") || doc["approve_with"] != "agentos tool approve "+id+" --events e.jsonl" {
		t.Fatalf("approval result: %v", doc)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); !os.IsNotExist(err) {
		t.Fatal("a call that needs approval was executed")
	}

	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "repo.read", Arguments: map[string]any{"path": "../etc/passwd"}})
	if err != nil || !res.IsError {
		t.Fatalf("jail escape: %+v %v", res, err)
	}
	if e, _ := structured(t, res)["error"].(map[string]any); e == nil || e["code"] == "" {
		t.Fatalf("jail escape: want a structured kernel error, got %v", structured(t, res))
	}
	if got := strings.Join(rec.types, ","); got != "tool.invoke,tool.result,approval.requested,tool.rejected" {
		t.Fatalf("events %s", got)
	}
}

func TestHTTPHandlerNeedsTheBearerToken(t *testing.T) {
	k, _ := newKernel(t)
	token := serve.NewToken()
	srv := httptest.NewServer(serve.HTTPHandler(serve.New(k, &recorder{}, serve.Options{}), token))
	defer srv.Close()
	for _, auth := range []string{"", "Bearer wrong", "Basic " + token, token} {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: status %d, want 401", auth, resp.StatusCode)
		}
	}
	hc := &http.Client{Transport: bearerRT{token}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "repo.read", Arguments: map[string]any{"path": "hello.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("repo.read over http: %+v %v", res, err)
	}
}

type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}
