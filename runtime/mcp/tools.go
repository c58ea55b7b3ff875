package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/run"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Prefix starts every MCP tool's kernel name: mcp.<server>.<tool>.
const Prefix = "mcp."

// MaxToolName is the longest tool name the model APIs accept (OpenAI's
// and Anthropic's function names: 64 characters).
const MaxToolName = 64

// ToolName is the kernel name of a server's tool.
func ToolName(server, tool string) string { return Prefix + server + "." + tool }

// SplitName splits a kernel name mcp.<server>.<tool>.
func SplitName(name string) (server, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, Prefix)
	if !found {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, ".")
	return server, tool, ok && server != "" && tool != ""
}

// OutputSchema is the kernel output schema of every MCP tool: the MCP
// result with its text/image/resource content and its structured content
// both kept.
const OutputSchema = `{"type":"object","required":["content"],"properties":{"content":{"type":"array","items":{"type":"object","required":["type"],"properties":{"type":{"type":"string"}}}},"structuredContent":{},"isError":{"type":"boolean"}}}`

// Result is what an MCP tool returns through the kernel.
type Result struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent,omitempty"`
	IsError           bool              `json:"isError,omitempty"`
	// ServerStderr is what a stdio server wrote to stderr since the
	// previous call's answer (redacted, the last 4 KiB), so that its
	// diagnostics reach the log. stderr is a separate stream: a line the
	// server wrote just before answering may come with the next call.
	ServerStderr string `json:"serverStderr,omitempty"`
}

// outputSchema is the kernel output schema of a tool that declares an
// output schema of its own: its structuredContent must be present and
// match it (a server MUST return conforming structured content; one that
// does not gets SCHEMA_VIOLATION, not a result the model trusts). The
// declared schema is embedded as its own resource ($id), so its local
// references ("#/$defs/…") resolve within it.
func outputSchema(declared json.RawMessage) (json.RawMessage, error) {
	if len(declared) == 0 || string(declared) == "null" {
		return json.RawMessage(OutputSchema), nil
	}
	var d map[string]any
	if err := json.Unmarshal(declared, &d); err != nil {
		return nil, fmt.Errorf("output schema is not a JSON object: %v", err)
	}
	if _, ok := d["$id"]; !ok {
		d["$id"] = "urn:agentos:mcp-output-schema"
	}
	var base map[string]any
	if err := json.Unmarshal([]byte(OutputSchema), &base); err != nil {
		return nil, err
	}
	base["required"] = []any{"content", "structuredContent"}
	base["properties"].(map[string]any)["structuredContent"] = d
	return json.Marshal(base)
}

// Def returns the kernel tool for one tool of a server. The input schema
// is the server's (compiled by the kernel with jsonschema/v6 at Register);
// so is the output schema when the server declares one (outputSchema).
func (m *Mount) Def(server, tool, description string, input json.RawMessage) kernel.ToolDef {
	return m.def(server, tool, description, input, json.RawMessage(OutputSchema))
}

func (m *Mount) def(server, tool, description string, input, output json.RawMessage) kernel.ToolDef {
	cat := kernel.CategoryExec // a stdio server is a process in the sandbox
	if s := m.servers[server]; s != nil && s.cfg.Type == TypeHTTP {
		cat = kernel.CategoryNetwork
	}
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{"type":"object"}`)
	}
	return kernel.ToolDef{
		Name:        ToolName(server, tool),
		Description: description,
		Input:       input,
		Output:      output,
		Category:    cat,
		Handler: func(ctx context.Context, env kernel.Env, args json.RawMessage) (any, error) {
			res, err := m.Call(ctx, server, tool, args)
			if err != nil {
				return nil, err
			}
			return convert(res.CallToolResult, res.Stderr, env.Redact)
		},
		Assess: func(ctx context.Context, env kernel.Env, args json.RawMessage) (kernel.Assessment, error) {
			// What a maintainer approves: which server, which tool, the
			// arguments (recorded with the pending action).
			s := m.servers[server]
			a := kernel.Assessment{}
			if s != nil {
				switch s.cfg.Type {
				case TypeStdio:
					a.Command = "mcp " + server + " (" + strings.Join(append([]string{s.cfg.Command}, s.cfg.Args...), " ") + "): " + tool
				case TypeHTTP:
					a.Command = "mcp " + server + " (" + s.cfg.URL + "): " + tool
				}
			}
			return a, nil
		},
	}
}

// convert turns an SDK result into the kernel result, redacting text.
func convert(res *sdk.CallToolResult, stderr string, red func(string) string) (any, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, &kernel.Error{Kind: "runtime", Code: CodeProtocolError, Message: "MCP result does not encode: " + err.Error()}
	}
	var out Result
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, &kernel.Error{Kind: "runtime", Code: CodeProtocolError, Message: "MCP result: " + err.Error()}
	}
	if out.Content == nil {
		out.Content = []json.RawMessage{}
	}
	out.ServerStderr = stderr
	var texts []string
	for i, c := range out.Content {
		var t struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(c, &t) == nil && t.Type == "text" && red != nil {
			if r := red(t.Text); r != t.Text {
				var m map[string]any
				if json.Unmarshal(c, &m) == nil {
					m["text"] = r
					out.Content[i], _ = json.Marshal(m)
				}
				t.Text = r
			}
		}
		if t.Type == "text" {
			texts = append(texts, t.Text)
		}
	}
	if out.IsError {
		msg := strings.Join(texts, "\n")
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		if msg == "" {
			msg = "the tool reported an error"
		}
		return nil, &kernel.Error{Kind: "runtime", Code: CodeToolError, Message: msg, Details: out}
	}
	return out, nil
}

// Register starts (lazily: now, since the kernel needs their schemas)
// every server not in known, lists its tools and registers them in k. It
// returns notes about servers or tools that could not be mounted; a
// server that fails is left out, the others are mounted.
func (m *Mount) Register(ctx context.Context, k *kernel.Kernel, known map[string]bool) []string {
	notes, _ := m.register(ctx, k, known)
	return notes
}

// register is Register, with the servers that failed described for the
// run's log.
func (m *Mount) register(ctx context.Context, k *kernel.Kernel, known map[string]bool) (notes []string, failed []Failure) {
	for _, name := range m.order {
		if known[name] {
			continue
		}
		tools, err := m.ListTools(ctx, name)
		if err != nil {
			notes = append(notes, fmt.Sprintf("MCP server %s not mounted: %v", name, err))
			failed = append(failed, m.failure(name, err))
			continue
		}
		for _, t := range tools {
			if !toolName.MatchString(t.Name) {
				notes = append(notes, fmt.Sprintf("MCP tool %s.%q skipped: not a valid tool name", name, t.Name))
				continue
			}
			if n := ToolName(name, t.Name); len(n) > MaxToolName {
				notes = append(notes, fmt.Sprintf("MCP tool %s skipped: longer than the %d characters model APIs accept for a tool name (shorten the server's name in %s)", n, MaxToolName, ConfigFile))
				continue
			}
			in, err := json.Marshal(t.InputSchema)
			if err == nil {
				err = localRefsOnly(in)
			}
			if err != nil {
				notes = append(notes, fmt.Sprintf("MCP tool %s.%s skipped: input schema: %v", name, t.Name, err))
				continue
			}
			var declared json.RawMessage
			if t.OutputSchema != nil {
				declared, err = json.Marshal(t.OutputSchema)
				if err == nil {
					err = localRefsOnly(declared)
				}
			}
			var out json.RawMessage
			if err == nil {
				out, err = outputSchema(declared)
			}
			if err != nil {
				notes = append(notes, fmt.Sprintf("MCP tool %s.%s skipped: output schema: %v", name, t.Name, err))
				continue
			}
			if err := k.Register(m.def(name, t.Name, t.Description, in, out)); err != nil {
				notes = append(notes, fmt.Sprintf("MCP tool %s.%s skipped: %v", name, t.Name, err))
			}
		}
	}
	return notes, failed
}

// RegisterRecorded registers the MCP tools a session's log already
// offered to the model (the tools of its latest llm.request), without
// starting any server: a resumed or re-executed run sees the same tools
// as the recorded one, and a server starts only when one of its tools is
// called live. It returns the servers it registered tools for.
func (m *Mount) RegisterRecorded(k *kernel.Kernel, events []event.Event) (map[string]bool, error) {
	specs := RecordedSpecs(events)
	done := map[string]bool{}
	for _, s := range specs {
		server, tool, ok := SplitName(s.Name)
		if !ok || m.servers[server] == nil || localRefsOnly(s.InputSchema) != nil {
			continue
		}
		if err := k.Register(m.Def(server, tool, s.Description, s.InputSchema)); err != nil && !errors.Is(err, kernel.ErrRegister) {
			return nil, err
		} else if err != nil && !strings.Contains(err.Error(), "already registered") {
			return nil, err
		}
		done[server] = true
	}
	return done, nil
}

// RecordedSpecs returns the mcp.* tool specs of the latest llm.request in
// events that offered tools.
func RecordedSpecs(events []event.Event) []provider.ToolSpec {
	var prompts *event.Prompts
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Type != event.LLMRequest {
			continue
		}
		if prompts == nil {
			prompts = event.NewPrompts(events)
		}
		// Read back whole: its tool specs may be prompt blocks defined
		// by an earlier request (docs/decisions.md).
		req, err := prompts.Request(&e)
		if err != nil {
			continue
		}
		var p struct {
			Tools []provider.ToolSpec `json:"tools"`
		}
		if json.Unmarshal(req, &p) != nil || len(p.Tools) == 0 {
			continue
		}
		var out []provider.ToolSpec
		for _, t := range p.Tools {
			if strings.HasPrefix(t.Name, Prefix) {
				out = append(out, t)
			}
		}
		return out
	}
	return nil
}

// Tools is the engine's tool set with a session's MCP servers mounted
// lazily: the servers are started and their tools registered in the
// kernel the first time the model's tool list is built, not before.
// Servers whose tools the session's log already recorded are registered
// from the log (Seed) and not started until called.
type Tools struct {
	run.KernelTools
	M *Mount
	// Notes receives what could not be mounted (nil: dropped).
	Notes func(string)
	// Failed receives each server that did not start or list its tools
	// (nil: dropped), for the run's log (mcp.server_failed).
	Failed func(Failure)

	mu   sync.Mutex
	seen map[string]bool
}

// Seed registers the tools recorded in a session's events (see
// RegisterRecorded); call it before the engine runs on that history.
func (t *Tools) Seed(events []event.Event) error {
	done, err := t.M.RegisterRecorded(t.K, events)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	for s := range done {
		t.seen[s] = true
	}
	return nil
}

// Specs implements run.Tools: the first call whose scope includes a
// server's tools (a nil scope includes every server) mounts it.
func (t *Tools) Specs(scope []string) []provider.ToolSpec {
	t.mu.Lock()
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	skip := map[string]bool{}
	for _, n := range t.M.order {
		skip[n] = t.seen[n]
		if scope != nil && !scopeNames(scope, n) {
			skip[n] = true
		}
	}
	ctx, cancel := context.WithTimeout(t.M.ctx, t.M.opts.StartTimeout*2)
	notes, failed := t.M.register(ctx, t.K, skip)
	cancel()
	for _, n := range t.M.order {
		if !skip[n] {
			t.seen[n] = true // tried once: a server that failed is not retried per turn
		}
	}
	t.mu.Unlock()
	for _, n := range notes {
		if t.Notes != nil {
			t.Notes(n)
		}
	}
	for _, f := range failed {
		if t.Failed != nil {
			t.Failed(f)
		}
	}
	return t.KernelTools.Specs(scope)
}

func scopeNames(scope []string, server string) bool {
	for _, s := range scope {
		if strings.HasPrefix(s, Prefix+server+".") {
			return true
		}
	}
	return false
}

var _ run.Tools = (*Tools)(nil)

var _ run.HistorySeeder = (*Tools)(nil)

// localRefsOnly refuses a schema that refers outside itself: the kernel
// compiles schemas in the bot's process, and a server must not make it
// load files (or anything else) by naming them in a $ref.
func localRefsOnly(doc json.RawMessage) error {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return err
	}
	var walk func(any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if k == "$ref" || k == "$dynamicRef" || k == "$recursiveRef" {
					if r, ok := c.(string); !ok || !strings.HasPrefix(r, "#") {
						return fmt.Errorf("%s %v refers outside the schema", k, c)
					}
				}
				if k == "$id" {
					return fmt.Errorf("$id %v: a tool schema may not declare its own base URI", c)
				}
				if err := walk(c); err != nil {
					return err
				}
			}
		case []any:
			for _, c := range x {
				if err := walk(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(v)
}
