// Package scripted is the deterministic provider: it plays a script of
// responses per role and turn, and can record a real provider's responses
// into such a script. It is the default for tests and the demo, so the
// whole runtime runs with no API key and no network.
//
// A script is YAML or JSON:
//
//	model: scripted
//	roles:
//	  lead:
//	    - text: '{"intent":"fix auth","constraints":[],"schema_version":"v1"}'
//	  worker:
//	    - tool_calls: [{id: t1, name: repo.read, args: {path: auth.go}}]
//	    - text: '{"output":"done","steps_completed":["s1"],"schema_version":"v1"}'
//	      usage: {input_tokens: 900, output_tokens: 40}
//	    - error: {message: "overloaded", retryable: true}
//
// The n-th call of a role (CompletionRequest.Turn, counted from the
// session's log so that a resumed run continues where it left off) gets the
// role's n-th entry.
package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/agentos/agentos/runtime/provider"
	"gopkg.in/yaml.v3"
)

// Script is a set of responses per role.
type Script struct {
	Model string             `yaml:"model,omitempty" json:"model,omitempty"`
	Roles map[string][]Entry `yaml:"roles" json:"roles"`
}

// Entry is one scripted response, or a scripted failure.
type Entry struct {
	Text         string         `yaml:"text,omitempty" json:"text,omitempty"`
	ToolCalls    []Call         `yaml:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	FinishReason string         `yaml:"finish_reason,omitempty" json:"finish_reason,omitempty"`
	Usage        provider.Usage `yaml:"usage,omitempty" json:"usage,omitempty"`
	Error        *Failure       `yaml:"error,omitempty" json:"error,omitempty"`
}

// Call is a scripted tool call; Args may be any YAML/JSON object.
type Call struct {
	ID   string         `yaml:"id" json:"id"`
	Name string         `yaml:"name" json:"name"`
	Args map[string]any `yaml:"args" json:"args"`
}

// Failure scripts a provider error.
type Failure struct {
	Message   string `yaml:"message" json:"message"`
	Status    int    `yaml:"status,omitempty" json:"status,omitempty"`
	Retryable bool   `yaml:"retryable,omitempty" json:"retryable,omitempty"`
}

// Parse reads a YAML or JSON script (YAML is a superset of JSON).
func Parse(r io.Reader) (*Script, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var s Script
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scripted: parse script: %w", err)
	}
	if len(s.Roles) == 0 {
		return nil, fmt.Errorf("scripted: script has no roles")
	}
	for role, entries := range s.Roles {
		for i, e := range entries {
			if e.Error == nil && e.Text == "" && len(e.ToolCalls) == 0 {
				return nil, fmt.Errorf("scripted: roles.%s[%d]: an entry needs text, tool_calls or error", role, i)
			}
			for j, c := range e.ToolCalls {
				if c.ID == "" || c.Name == "" {
					return nil, fmt.Errorf("scripted: roles.%s[%d].tool_calls[%d]: id and name are required", role, i, j)
				}
			}
		}
	}
	if s.Model == "" {
		s.Model = "scripted"
	}
	return &s, nil
}

// Load reads a script file.
func Load(path string) (*Script, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Provider plays a script.
type Provider struct {
	s *Script
}

// New returns a provider playing s.
func New(s *Script) *Provider { return &Provider{s: s} }

// Name implements provider.Provider.
func (p *Provider) Name() string { return "scripted" }

// Complete implements provider.Provider.
func (p *Provider) Complete(ctx context.Context, req provider.CompletionRequest) (provider.CompletionResponse, error) {
	if err := ctx.Err(); err != nil {
		return provider.CompletionResponse{}, err
	}
	entries, ok := p.s.Roles[req.Role]
	if !ok {
		return provider.CompletionResponse{}, &provider.Error{Code: provider.CodeProviderError, Provider: "scripted", Message: fmt.Sprintf("the script has no responses for role %q", req.Role)}
	}
	if req.Turn < 0 || req.Turn >= len(entries) {
		return provider.CompletionResponse{}, &provider.Error{Code: provider.CodeProviderError, Provider: "scripted", Message: fmt.Sprintf("the script ran out: role %q has %d responses, call %d asked", req.Role, len(entries), req.Turn+1)}
	}
	e := entries[req.Turn]
	if e.Error != nil {
		return provider.CompletionResponse{}, &provider.Error{Code: provider.CodeProviderError, Provider: "scripted", Status: e.Error.Status, Retryable: e.Error.Retryable, Message: e.Error.Message}
	}
	resp := provider.CompletionResponse{Text: e.Text, ToolCalls: []provider.ToolCall{}, FinishReason: e.FinishReason, Usage: e.Usage, Model: p.s.Model, SchemaVersion: "v1"}
	for _, c := range e.ToolCalls {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		raw, err := json.Marshal(args)
		if err != nil {
			return provider.CompletionResponse{}, &provider.Error{Code: provider.CodeProviderError, Provider: "scripted", Message: "tool call args: " + err.Error()}
		}
		resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: c.ID, Name: c.Name, Args: raw})
	}
	if resp.FinishReason == "" {
		resp.FinishReason = provider.FinishStop
		if len(resp.ToolCalls) > 0 {
			resp.FinishReason = provider.FinishToolUse
		}
	}
	if resp.Usage.InputTokens == 0 && resp.Usage.OutputTokens == 0 {
		// Estimate like a tokenizer would, so budgets and cost reports are
		// exercised by scripted runs: ~4 bytes per token.
		for _, m := range req.Messages {
			resp.Usage.InputTokens += int64(len(m.Content)/4 + 1)
		}
		resp.Usage.OutputTokens = int64(len(e.Text)/4 + 1)
	}
	return resp, nil
}

// Recorder wraps a real provider and records each response under its role,
// so a real session can be replayed later by the scripted provider.
type Recorder struct {
	P     provider.Provider
	mu    sync.Mutex
	s     Script
	turns map[string]int
}

// NewRecorder returns a recorder around p.
func NewRecorder(p provider.Provider) *Recorder {
	return &Recorder{P: p, s: Script{Roles: map[string][]Entry{}}, turns: map[string]int{}}
}

// Name implements provider.Provider.
func (r *Recorder) Name() string { return r.P.Name() }

// Complete implements provider.Provider.
func (r *Recorder) Complete(ctx context.Context, req provider.CompletionRequest) (provider.CompletionResponse, error) {
	resp, err := r.P.Complete(ctx, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.s.Model == "" && err == nil {
		r.s.Model = resp.Model
	}
	var e Entry
	if err != nil {
		f := &Failure{Message: err.Error()}
		if pe, ok := err.(*provider.Error); ok {
			f.Status, f.Retryable = pe.Status, pe.Retryable
		}
		e.Error = f
	} else {
		e = Entry{Text: resp.Text, FinishReason: resp.FinishReason, Usage: resp.Usage}
		for _, c := range resp.ToolCalls {
			var args map[string]any
			if jerr := json.Unmarshal(c.Args, &args); jerr != nil {
				args = map[string]any{"_raw": string(c.Args)}
			}
			e.ToolCalls = append(e.ToolCalls, Call{ID: c.ID, Name: c.Name, Args: args})
		}
	}
	r.s.Roles[req.Role] = append(r.s.Roles[req.Role], e)
	return resp, err
}

// Script returns what was recorded so far.
func (r *Recorder) Script() Script {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := Script{Model: r.s.Model, Roles: map[string][]Entry{}}
	for k, v := range r.s.Roles {
		out.Roles[k] = append([]Entry(nil), v...)
	}
	return out
}

// WriteYAML writes the recorded script.
func (r *Recorder) WriteYAML(w io.Writer) error {
	s := r.Script()
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&s); err != nil {
		return err
	}
	return enc.Close()
}
