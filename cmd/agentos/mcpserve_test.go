package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/testenv"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// cliCommand is this test binary re-run as the CLI with args (see
// TestCLIProcess).
func cliCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCLIProcess$")
	cmd.Env = append(os.Environ(), "AGENTOS_CLI_ARGS="+strings.Join(args, "\x1f"))
	return cmd
}

func mcpWorkspace(t *testing.T) (ws, events string) {
	t.Helper()
	ws = t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hello from the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, filepath.Join(t.TempDir(), "events.jsonl")
}

// TestMCPServeStdioWithGoSDKClient: agentos mcp serve in its own process,
// driven by the Go SDK's client over stdio. A write needs approval: the
// client gets the pending id, agentos tool approve executes it, and the
// log verifies.
func TestMCPServeStdioWithGoSDKClient(t *testing.T) {
	ws, events := mcpWorkspace(t)
	cmd := cliCommand("mcp", "serve", "--workspace", ws, "--events", events)
	ctx := context.Background()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "repo.read", Arguments: map[string]any{"path": "hello.txt"}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "hello from the workspace") {
		t.Fatalf("repo.read: %+v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "repo.write", Arguments: map[string]any{"path": "new.txt", "content": "approved\n", "expected_hash": ""}})
	if err != nil || !res.IsError {
		t.Fatalf("repo.write: %+v %v", res, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var pending struct {
		Status      string `json:"status"`
		ApprovalID  string `json:"approval_id"`
		ApproveWith string `json:"approve_with"`
	}
	if err := json.Unmarshal(b, &pending); err != nil || pending.Status != "approval_required" || pending.ApprovalID == "" || !strings.Contains(pending.ApproveWith, "agentos tool approve "+pending.ApprovalID) {
		t.Fatalf("approval result %s (%v)", b, err)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Fatal("executed before approval")
	}
	cliProcess(t, exitOK, "tool", "approve", pending.ApprovalID, "--workspace", ws, "--events", events)
	if got, _ := os.ReadFile(filepath.Join(ws, "new.txt")); string(got) != "approved\n" {
		t.Fatalf("after approval new.txt = %q", got)
	}
	cliProcess(t, exitOK, "verify", events)
}

// startServeHTTP runs agentos mcp serve --http in its own process.
func startServeHTTP(t *testing.T, ws, events, token string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := cliCommand("mcp", "serve", "--workspace", ws, "--events", events, "--http", addr)
	cmd.Env = append(cmd.Env, "AGENTOS_MCP_TOKEN="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "/mcp; session") {
				close(ready)
				for sc.Scan() {
				}
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatal("agentos mcp serve --http did not start")
	}
	return "http://" + addr + "/mcp"
}

func TestMCPServeHTTPBearer(t *testing.T) {
	ws, events := mcpWorkspace(t)
	token := "test-token-0123456789abcdef"
	url := startServeHTTP(t, ws, events, token)
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: %d, want 401", resp.StatusCode)
	}
	hc := &http.Client{Transport: bearerTransport{token}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test"}, nil).Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "repo.search", Arguments: map[string]any{"query": "workspace"}})
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "hello.txt") {
		t.Fatalf("repo.search over http: %+v %v", res, err)
	}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// inspector returns the MCP Inspector's launcher from the npm test
// packages, or ends the test (a failure under CI=true).
func inspector(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("AGENTOS_NPM_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "agentos-npm")
	}
	p := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js")
	_, err := os.Stat(p)
	testenv.Require(t, "npm package @modelcontextprotocol/inspector (bash .ci/npm-deps.sh)", err)
	testenv.LookPath(t, "node")
	return p
}

func runInspector(t *testing.T, args ...string) string {
	t.Helper()
	out, err := inspectorOutput(t, args...)
	if err != nil {
		t.Fatalf("inspector %v: %v\n%s", args, err, out)
	}
	return out
}

func inspectorOutput(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("node", append([]string{inspector(t), "--cli"}, args...)...)
	cmd.Env = append(os.Environ(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "catalog.json"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMCPServeWithInspectorCLI lists and calls tools with the MCP
// Inspector's CLI, over stdio and over HTTP with the bearer token.
func TestMCPServeWithInspectorCLI(t *testing.T) {
	inspector(t)
	ws, events := mcpWorkspace(t)
	cliArgs := strings.Join([]string{"mcp", "serve", "--workspace", ws, "--events", events}, "\x1f")
	stdio := []string{"-e", "AGENTOS_CLI_ARGS=" + cliArgs, os.Args[0], "-test.run=^TestCLIProcess$"}

	out := runInspector(t, append(stdio, "--method", "tools/list")...)
	for _, want := range []string{`"repo.read"`, `"repo.patch"`, `"test.run"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("tools/list lacks %s:\n%s", want, out)
		}
	}
	out = runInspector(t, append(stdio, "--method", "tools/call", "--tool-name", "repo.read", "--tool-arg", "path=hello.txt")...)
	if !strings.Contains(out, "hello from the workspace") {
		t.Fatalf("tools/call repo.read:\n%s", out)
	}
	// The Inspector exits non-zero on a tool error (isError), which is what
	// a call that was not executed is.
	out, _ = inspectorOutput(t, append(stdio, "--method", "tools/call", "--tool-name", "process.run", "--tool-arg", "command=ls -la")...)
	if !strings.Contains(out, `"status": "approval_required"`) || !strings.Contains(out, `"approval_id": "ap-`) {
		t.Fatalf("tools/call process.run: want approval required:\n%s", out)
	}

	token := "inspector-token-0123456789"
	url := startServeHTTP(t, ws, filepath.Join(t.TempDir(), "http-events.jsonl"), token)
	out = runInspector(t, url, "--transport", "http", "--header", "Authorization: Bearer "+token, "--method", "tools/list")
	if !strings.Contains(out, `"repo.search"`) {
		t.Fatalf("tools/list over http:\n%s", out)
	}
}
