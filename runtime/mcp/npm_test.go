package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/mcp"
)

// TestServerEverything mounts the reference server from npm over stdio.
func TestServerEverything(t *testing.T) {
	entry := npmServer(t, "@modelcontextprotocol/server-everything", "dist/index.js")
	dir := t.TempDir()
	pol := policyWith(t, "")
	allow(pol, "mcp.everything.echo", "mcp.everything.get-sum", "mcp.everything.get-structured-content")
	e := newEnv(t, dir, `{"mcpServers":{"everything":{"command":"node","args":["`+entry+`","stdio"]}}}`, pol, mcp.Options{})
	ctx := context.Background()
	if notes := e.m.Register(ctx, e.k, nil); len(notes) > 0 {
		t.Fatalf("notes: %v", notes)
	}
	names := map[string]bool{}
	for _, d := range e.k.Tools() {
		names[d.Name] = true
	}
	for _, want := range []string{"mcp.everything.echo", "mcp.everything.get-sum", "mcp.everything.get-structured-content"} {
		if !names[want] {
			t.Fatalf("tool %s not registered; have %v", want, names)
		}
	}
	r := &recorder{}
	out, err := e.k.Dispatch(ctx, r, kernel.Call{ID: "c1", Name: "mcp.everything.echo", Args: json.RawMessage(`{"message":"hi there"}`)})
	if err != nil || !strings.Contains(string(out.Result), "hi there") {
		t.Fatalf("echo: %s, %v", out.Result, err)
	}
	out, err = e.k.Dispatch(ctx, r, kernel.Call{ID: "c2", Name: "mcp.everything.get-sum", Args: json.RawMessage(`{"a":2,"b":40}`)})
	if err != nil || !strings.Contains(string(out.Result), "42") {
		t.Fatalf("get-sum: %s, %v", out.Result, err)
	}
	out, err = e.k.Dispatch(ctx, r, kernel.Call{ID: "c3", Name: "mcp.everything.get-structured-content", Args: json.RawMessage(`{"location":"Chicago"}`)})
	if err != nil {
		t.Fatal(err)
	}
	var res mcp.Result
	if err := json.Unmarshal(out.Result, &res); err != nil || len(res.StructuredContent) == 0 || len(res.Content) == 0 {
		t.Fatalf("structured: %s, %v", out.Result, err)
	}
	// The server's zod schema guards the arguments in the kernel.
	_, err = e.k.Dispatch(ctx, r, kernel.Call{ID: "c4", Name: "mcp.everything.get-sum", Args: json.RawMessage(`{"a":"two","b":40}`)})
	if ke, ok := err.(*kernel.Error); !ok || ke.Code != kernel.CodeInvalidArguments {
		t.Fatalf("bad args: %v, want INVALID_ARGUMENTS", err)
	}
}

// TestServerFilesystem mounts the reference filesystem server from npm,
// confined to the worktree.
func TestServerFilesystem(t *testing.T) {
	entry := npmServer(t, "@modelcontextprotocol/server-filesystem", "dist/index.js")
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/notes.txt", []byte("remember the milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pol := policyWith(t, "")
	allow(pol, "mcp.fs.read_text_file", "mcp.fs.list_directory")
	e := newEnv(t, dir, `{"mcpServers":{"fs":{"command":"node","args":["`+entry+`","."]}}}`, pol, mcp.Options{})
	ctx := context.Background()
	if notes := e.m.Register(ctx, e.k, nil); len(notes) > 0 {
		t.Fatalf("notes: %v", notes)
	}
	r := &recorder{}
	out, err := e.k.Dispatch(ctx, r, kernel.Call{ID: "c1", Name: "mcp.fs.read_text_file", Args: json.RawMessage(`{"path":"notes.txt"}`)})
	if err != nil || !strings.Contains(string(out.Result), "remember the milk") {
		t.Fatalf("read_text_file: %s, %v", out.Result, err)
	}
	out, err = e.k.Dispatch(ctx, r, kernel.Call{ID: "c2", Name: "mcp.fs.list_directory", Args: json.RawMessage(`{"path":"."}`)})
	if err != nil || !strings.Contains(string(out.Result), "notes.txt") {
		t.Fatalf("list_directory: %s, %v", out.Result, err)
	}
	// The kernel's path guard applies to MCP tools as to built-in ones: an
	// absolute path never reaches the server.
	_, err = e.k.Dispatch(ctx, r, kernel.Call{ID: "c3", Name: "mcp.fs.read_text_file", Args: json.RawMessage(`{"path":"/etc/hostname"}`)})
	if ke, ok := err.(*kernel.Error); !ok || ke.Code != kernel.CodeInvalidArguments {
		t.Fatalf("outside path: %v, want INVALID_ARGUMENTS", err)
	}
	// The server's own errors are tool errors, recorded; the session goes on.
	_, err = e.k.Dispatch(ctx, r, kernel.Call{ID: "c4", Name: "mcp.fs.read_text_file", Args: json.RawMessage(`{"path":"missing.txt"}`)})
	if ke, ok := err.(*kernel.Error); !ok || ke.Code != mcp.CodeToolError {
		t.Fatalf("missing file: %v, want %s", err, mcp.CodeToolError)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEverythingHTTP runs server-everything's Streamable HTTP transport.
func startEverythingHTTP(t *testing.T) int {
	t.Helper()
	entry := npmServer(t, "@modelcontextprotocol/server-everything", "dist/index.js")
	port := freePort(t)
	cmd := exec.Command("node", entry, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
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
			if strings.Contains(sc.Text(), "listening on port") {
				close(ready)
				for sc.Scan() {
				}
				return
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("server-everything (streamableHttp) did not start")
	}
	return port
}

// TestServerEverythingHTTP mounts server-everything over Streamable HTTP,
// with a header from an allow-listed variable, and refuses a URL outside
// the network allow-list.
func TestServerEverythingHTTP(t *testing.T) {
	port := startEverythingHTTP(t)
	dir := t.TempDir()
	pol := policyWith(t, "")
	allow(pol, "mcp.remote.echo")
	pol.Network.Allow = []string{fmt.Sprintf("127.0.0.1:%d", port)}
	pol.Execution.EnvAllow = []string{"REMOTE_KEY"}
	t.Setenv("REMOTE_KEY", "k-123")
	cfg := fmt.Sprintf(`{"mcpServers":{
		"remote":{"type":"http","url":"http://127.0.0.1:%d/mcp","headers":{"X-Api-Key":"${REMOTE_KEY}"}},
		"elsewhere":{"type":"http","url":"http://127.0.0.1:%d/mcp"}}}`, port, port+1)
	e := newEnv(t, dir, cfg, pol, mcp.Options{})
	ctx := context.Background()
	notes := e.m.Register(ctx, e.k, nil)
	if len(notes) != 1 || !strings.Contains(notes[0], "elsewhere") || !strings.Contains(notes[0], "not in the network allow-list") {
		t.Fatalf("notes = %v", notes)
	}
	r := &recorder{}
	out, err := e.k.Dispatch(ctx, r, kernel.Call{ID: "c1", Name: "mcp.remote.echo", Args: json.RawMessage(`{"message":"over http"}`)})
	if err != nil || !strings.Contains(string(out.Result), "over http") {
		t.Fatalf("echo: %s, %v", out.Result, err)
	}
	for _, d := range e.k.Tools() {
		if d.Name == "mcp.remote.echo" && d.Category != kernel.CategoryNetwork {
			t.Fatalf("category = %s, want network", d.Category)
		}
	}
}
