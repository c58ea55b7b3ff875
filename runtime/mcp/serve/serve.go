// Package serve exposes a kernel's governed tools as an MCP server, to
// any MCP client (Claude Code, Cursor, VS Code, the MCP Inspector). Every
// call goes through the full kernel — argument guard, hooks, policy and
// risk, preview, approval gate, jail, output caps, redaction — and is
// recorded in the session's event log. A call that needs approval does
// not execute: it returns a structured "approval required" result with
// the pending action's id, which a maintainer answers out of band
// (agentos tool approve).
package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentos/agentos/kernel"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a server.
type Options struct {
	// Name and Version identify the server to clients.
	Name, Version string
	// ApproveHint is how a maintainer answers a pending action, with %s
	// for its id (e.g. "agentos tool approve %s --workspace . --events
	// log.jsonl"); it goes into the approval-required result.
	ApproveHint string
	// Caller is recorded as the actor of every tool.invoke.
	Caller string
}

// lockedRecorder serialises appends: concurrent MCP requests share one log.
type lockedRecorder struct {
	mu  sync.Mutex
	rec kernel.Recorder
}

func (l *lockedRecorder) Record(ctx context.Context, typ, actor string, payload any, parent string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec.Record(ctx, typ, actor, payload, parent)
}

// New returns an MCP server whose tools are k's tools, recording through
// rec.
func New(k *kernel.Kernel, rec kernel.Recorder, o Options) *sdk.Server {
	if o.Name == "" {
		o.Name = "agentos"
	}
	if o.Caller == "" {
		o.Caller = "mcp-client"
	}
	s := sdk.NewServer(&sdk.Implementation{Name: o.Name, Version: o.Version}, nil)
	lr := &lockedRecorder{rec: rec}
	var n atomic.Int64
	prefix := randomHex(4)
	for _, d := range k.Tools() {
		name := d.Name
		s.AddTool(&sdk.Tool{Name: d.Name, Description: d.Description, InputSchema: json.RawMessage(d.Input), OutputSchema: nil},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				id := fmt.Sprintf("mcp-%s-%d", prefix, n.Add(1))
				args := req.Params.Arguments
				if len(args) == 0 {
					args = json.RawMessage(`{}`)
				}
				out, err := k.Dispatch(ctx, lr, kernel.Call{ID: id, Name: name, Args: args, Caller: o.Caller})
				return toResult(out, err, o)
			})
	}
	return s
}

// toResult turns a kernel outcome into an MCP result. Kernel errors
// (blocked, denied, failed) are tool errors the model can read, with the
// error as structured content; only infrastructure failures (a log that
// cannot be appended to) are protocol errors.
func toResult(out kernel.Outcome, err error, o Options) (*sdk.CallToolResult, error) {
	var ke *kernel.Error
	switch {
	case errors.As(err, &ke):
		doc := map[string]any{"error": ke}
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: ke.Error()}}, StructuredContent: doc}, nil
	case err != nil:
		return nil, err
	case out.Pending != nil:
		p := out.Pending
		doc := map[string]any{"status": "approval_required", "code": string(kernel.CodeApprovalRequired), "approval_id": p.ApprovalID, "tool": p.Tool, "digest": p.Digest, "preview": p.Preview, "risk": p.Risk}
		text := fmt.Sprintf("APPROVAL_REQUIRED: %s was not executed; a maintainer must approve pending action %s (%s).", p.Tool, p.ApprovalID, p.Risk.Reason)
		if o.ApproveHint != "" {
			hint := fmt.Sprintf(o.ApproveHint, p.ApprovalID)
			doc["approve_with"] = hint
			text += " Approve with: " + hint
		}
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}, StructuredContent: doc}, nil
	}
	var structured any = out.Result
	if len(out.Result) == 0 || out.Result[0] != '{' {
		// structuredContent is an object; wrap anything else.
		structured = map[string]json.RawMessage{"result": out.Result}
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(out.Result)}}, StructuredContent: structured}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewToken returns a random bearer token.
func NewToken() string { return randomHex(24) }

// HTTPHandler serves s over Streamable HTTP, admitting only requests that
// carry "Authorization: Bearer <token>" (compared in constant time).
func HTTPHandler(s *sdk.Server, token string) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if token == "" || subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentos"`)
			http.Error(w, `{"error":"a valid bearer token is required"}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
