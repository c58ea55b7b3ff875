// Command faultserver is a tiny MCP server (official Go SDK, stdio) whose
// tools misbehave on purpose, for the client's fault tests: crash, hang,
// malformed output and huge output, plus a well-behaved echo with
// structured content. With -fail-start it exits before the handshake.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type echoOut struct {
	Echo   string `json:"echo"`
	Length int    `json:"length"`
}

type sizeIn struct {
	Bytes int `json:"bytes" jsonschema:"how many bytes of text to return"`
}

type empty struct{}

func main() {
	failStart := flag.Bool("fail-start", false, "exit before the MCP handshake")
	envName := flag.String("env-name", "FAULT_TOKEN", "the variable the env tool reports")
	flag.Parse()
	if *failStart {
		fmt.Fprintf(os.Stderr, "faultserver: refusing to start, FAULT_TOKEN=%s\n", os.Getenv("FAULT_TOKEN"))
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "faultserver: ready")
	s := mcp.NewServer(&mcp.Implementation{Name: "faultserver", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text back, as text and structured content."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, echoOut, error) {
			fmt.Fprintf(os.Stderr, "faultserver: echo %q\n", in.Text)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, echoOut{Echo: in.Text, Length: len(in.Text)}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Return the value of a variable (-env-name) as the server sees it."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			fmt.Fprintf(os.Stderr, "faultserver: %s=%s\n", *envName, os.Getenv(*envName))
			v, ok := os.LookupEnv(*envName)
			if !ok {
				v = "(unset)"
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: *envName + "=" + v}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Report a tool error (isError)."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			return nil, nil, fmt.Errorf("the widget is broken")
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit mid-call."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			fmt.Fprintf(os.Stderr, "faultserver: crashing now, FAULT_TOKEN=%s\n", os.Getenv("FAULT_TOKEN"))
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answer."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			time.Sleep(time.Hour) // ignores cancellation too
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "malformed", Description: "Write a line that is not JSON-RPC to stdout."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
			os.Stdout.WriteString("this is not JSON-RPC {\n")
			time.Sleep(time.Hour)
			return nil, nil, nil
		})
	// shape declares an output schema and answers with structured
	// content that keeps it or breaks it, as the argument says: a server
	// that lies about its own schema.
	s.AddTool(&mcp.Tool{Name: "shape", Description: "Return structured content that does or does not match the declared output schema.",
		InputSchema:  map[string]any{"type": "object", "properties": map[string]any{"mode": map[string]any{"type": "string"}}},
		OutputSchema: map[string]any{"type": "object", "required": []any{"n"}, "properties": map[string]any{"n": map[string]any{"type": "integer"}, "tags": map[string]any{"$ref": "#/$defs/tags"}}, "$defs": map[string]any{"tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}}},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct{ Mode string }
		_ = json.Unmarshal(req.Params.Arguments, &in)
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "mode " + in.Mode}}}
		switch in.Mode {
		case "ok":
			res.StructuredContent = map[string]any{"n": 1, "tags": []any{"日本語", ""}}
		case "wrong-type":
			res.StructuredContent = map[string]any{"n": "one"}
		case "bad-ref":
			res.StructuredContent = map[string]any{"n": 1, "tags": []any{1}}
		case "missing":
		case "no-content":
			res.Content = []mcp.Content{}
			res.StructuredContent = map[string]any{"n": 0}
		}
		return res, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "huge", Description: "Return a text of the given size."},
		func(_ context.Context, _ *mcp.CallToolRequest, in sizeIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Bytes)}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "faultserver:", err)
		os.Exit(1)
	}
}
