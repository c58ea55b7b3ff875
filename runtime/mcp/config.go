// Package mcp mounts a repository's MCP servers as governed kernel tools.
//
// A repository lists its servers in .mcp.json at its root, in the format
// Claude Code, Cursor, VS Code and claude-code-action read
// ({"mcpServers": {"name": {"command", "args", "env"}}} for stdio,
// {"type": "http", "url", "headers"} for Streamable HTTP). Each server's
// tools become kernel tools named mcp.<server>.<tool>: the kernel guards
// their arguments with the server's input schema and runs them through
// the same policy, risk, preview, approval, hooks, caps, redaction and
// events as built-in tools. A tool the policy does not name needs
// approval, so every MCP tool needs approval unless the policy allows it
// by name.
//
// Servers start lazily (when their tools are first listed or called) and
// stop when the session's Mount is closed. A stdio server runs in the
// workspace's OS sandbox like any command; an HTTP server is reached only
// when the policy's network allow-list covers its host. Environment values
// and headers may reference ${VAR}: only variables the operator
// allow-lists are expanded, and never one whose value holds a secret the
// bot itself uses.
package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/agentos/agentos/runtime/provider"
)

// ConfigFile is where a repository lists its MCP servers.
const ConfigFile = ".mcp.json"

// Server types.
const (
	TypeStdio = "stdio"
	TypeHTTP  = "http"
)

// Server is one configured MCP server.
type Server struct {
	Name    string            `json:"-"`
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Config is a parsed .mcp.json.
type Config struct {
	Servers map[string]Server
}

// Names returns the server names, sorted.
func (c *Config) Names() []string {
	out := make([]string, 0, len(c.Servers))
	for n := range c.Servers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ConfigError is a problem with a configuration file or one of its
// servers.
type ConfigError struct {
	File   string
	Server string // "" for the file as a whole
	Msg    string
}

func (e *ConfigError) Error() string {
	if e.Server != "" {
		return fmt.Sprintf("%s: server %q: %s", e.File, e.Server, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// serverName keeps tool names mcp.<server>.<tool> unambiguous: no dots.
var serverName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// toolName is what MCP allows for tool names (and what a kernel tool
// name may carry after mcp.<server>.).
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// ParseConfig reads a .mcp.json document. name is the file name used in
// errors. Unknown keys are ignored (other clients add their own), but
// every known key must have its type, a server needs a command (stdio) or
// an http(s) URL (http), and server names must be usable in tool names.
func ParseConfig(name string, r io.Reader) (*Config, error) {
	b, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return nil, &ConfigError{File: name, Msg: err.Error()}
	}
	if len(b) > 1<<20 {
		return nil, &ConfigError{File: name, Msg: "larger than 1 MiB"}
	}
	var doc struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		return nil, &ConfigError{File: name, Msg: "not a JSON object with mcpServers: " + err.Error()}
	}
	if dec.More() {
		return nil, &ConfigError{File: name, Msg: "trailing data after the JSON object"}
	}
	c := &Config{Servers: map[string]Server{}}
	for n, raw := range doc.MCPServers {
		if !serverName.MatchString(n) {
			return nil, &ConfigError{File: name, Server: n, Msg: "a server name may hold only letters, digits, '_' and '-' (it becomes part of the tool names mcp.<server>.<tool>)"}
		}
		var s Server
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, &ConfigError{File: name, Server: n, Msg: err.Error()}
		}
		s.Name = n
		if err := s.validate(); err != nil {
			return nil, &ConfigError{File: name, Server: n, Msg: err.Error()}
		}
		c.Servers[n] = s
	}
	return c, nil
}

func (s *Server) validate() error {
	if s.Type == "" {
		switch {
		case s.Command != "":
			s.Type = TypeStdio
		case s.URL != "":
			// Claude Code needs the type for URLs; VS Code and Cursor infer it.
			s.Type = TypeHTTP
		}
	}
	switch s.Type {
	case TypeStdio:
		if strings.TrimSpace(s.Command) == "" {
			return errors.New("a stdio server needs a command")
		}
		if s.URL != "" || len(s.Headers) > 0 {
			return errors.New("a stdio server has no url or headers")
		}
	case TypeHTTP, "streamable-http", "streamableHttp":
		s.Type = TypeHTTP
		if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 {
			return errors.New("an http server has no command, args or env")
		}
		if s.URL == "" {
			return errors.New("an http server needs a url")
		}
	case "sse":
		return errors.New(`type "sse" (the deprecated HTTP+SSE transport) is not supported: use "http" (Streamable HTTP)`)
	case "":
		return errors.New("neither a command (stdio) nor a url (http)")
	default:
		return fmt.Errorf("unknown type %q (stdio or http)", s.Type)
	}
	return nil
}

// Expander resolves ${VAR} and ${VAR:-default} references.
type Expander struct {
	// Allow are the variable names the operator allow-lists
	// (policy.yaml execution.envAllow).
	Allow []string
	// Getenv reads a variable (os.Getenv in production).
	Getenv func(string) string
	// Secret reports a value that holds one of the bot's own secrets (the
	// provider key, the GitHub token): such a value is never handed to a
	// server, allow-listed or not. The variables agentos reads its own
	// credentials from (GITHUB_TOKEN, OPENAI_API_KEY, ...) are refused by
	// name as well.
	Secret func(value string) bool
}

// botSecretNames are the variables agentos itself reads its credentials
// from: never expanded for a server, whatever the allow-list says.
var botSecretNames = map[string]bool{
	"GITHUB_TOKEN": true, "GH_TOKEN": true, "AGENTOS_GITHUB_TOKEN": true, "AGENTOS_GITHUB_PRIVATE_KEY": true,
	"AGENTOS_GITHUB_PRIVATE_KEY_FILE": true, "AGENTOS_WEBHOOK_SECRET": true, "AGENTOS_API_TOKEN": true, "AGENTOS_API_KEY": true,
	"AGENTOS_MCP_TOKEN": true, "OPENAI_API_KEY": true, "ANTHROPIC_API_KEY": true, "ANTHROPIC_AUTH_TOKEN": true,
	"GEMINI_API_KEY": true, "GOOGLE_API_KEY": true, "ACTIONS_RUNTIME_TOKEN": true, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": true,
}

var ref = regexp.MustCompile(`\$\{([^}]*)\}`)
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Expand returns s with its references resolved, or an error naming the
// first reference that is not allowed.
func (x Expander) Expand(s string) (string, error) {
	var firstErr error
	out := ref.ReplaceAllStringFunc(s, func(m string) string {
		if firstErr != nil {
			return ""
		}
		inner := m[2 : len(m)-1]
		name, def, hasDef := strings.Cut(inner, ":-")
		if !varName.MatchString(name) {
			firstErr = fmt.Errorf("%s is not a variable reference", m)
			return ""
		}
		if botSecretNames[name] {
			firstErr = fmt.Errorf("${%s} is one of agentos's own secrets; it is never passed to an MCP server", name)
			return ""
		}
		allowed := false
		for _, a := range x.Allow {
			if a == name {
				allowed = true
			}
		}
		if !allowed {
			firstErr = fmt.Errorf("${%s} is not in the operator's allow-list (policy.yaml execution.envAllow); it is not passed to MCP servers", name)
			return ""
		}
		v := ""
		if x.Getenv != nil {
			v = x.Getenv(name)
		}
		if v == "" && hasDef {
			v = def
		}
		if v != "" && x.Secret != nil && x.Secret(v) {
			firstErr = fmt.Errorf("${%s} holds one of agentos's own secrets; it is never passed to an MCP server", name)
			return ""
		}
		return v
	})
	if firstErr != nil {
		return "", firstErr
	}
	return out, nil
}

// Resolve returns the server with every reference expanded, and checks an
// http server's URL.
func (x Expander) Resolve(s Server) (Server, error) {
	var err error
	out := s
	if out.Command, err = x.Expand(s.Command); err != nil {
		return Server{}, fmt.Errorf("command: %w", err)
	}
	out.Args = make([]string, len(s.Args))
	for i, a := range s.Args {
		if out.Args[i], err = x.Expand(a); err != nil {
			return Server{}, fmt.Errorf("args[%d]: %w", i, err)
		}
	}
	if out.Env, err = x.expandMap("env", s.Env); err != nil {
		return Server{}, err
	}
	if out.Headers, err = x.expandMap("headers", s.Headers); err != nil {
		return Server{}, err
	}
	if out.URL, err = x.Expand(s.URL); err != nil {
		return Server{}, fmt.Errorf("url: %w", err)
	}
	if out.Type == TypeHTTP {
		u, perr := url.Parse(out.URL)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Server{}, fmt.Errorf("url %q is not an http(s) URL", out.URL)
		}
	}
	return out, nil
}

func (x Expander) expandMap(what string, m map[string]string) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if k == "" || strings.ContainsAny(k, "=\x00\r\n") {
			return nil, fmt.Errorf("%s: invalid name %q", what, k)
		}
		e, err := x.Expand(v)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", what, k, err)
		}
		out[k] = e
	}
	return out, nil
}

// Merge returns the servers of base with those of over added; a name in
// both takes over's server, and is reported.
func Merge(base, over *Config) (*Config, []string) {
	out := &Config{Servers: map[string]Server{}}
	var shadowed []string
	if base != nil {
		for n, s := range base.Servers {
			out.Servers[n] = s
		}
	}
	if over != nil {
		for n, s := range over.Servers {
			if _, dup := out.Servers[n]; dup {
				shadowed = append(shadowed, n)
			}
			out.Servers[n] = s
		}
	}
	sort.Strings(shadowed)
	return out, shadowed
}

// FromProfile validates an agent profile's servers (mcp_servers).
func FromProfile(servers map[string]provider.MCPServer) (*Config, error) {
	c := &Config{Servers: map[string]Server{}}
	for n, p := range servers {
		if !serverName.MatchString(n) {
			return nil, &ConfigError{File: "profile mcp_servers", Server: n, Msg: "a server name may hold only letters, digits, '_' and '-'"}
		}
		s := Server{Name: n, Type: p.Type, Command: p.Command, Args: p.Args, Env: p.Env, URL: p.URL, Headers: p.Headers}
		if err := s.validate(); err != nil {
			return nil, &ConfigError{File: "profile mcp_servers", Server: n, Msg: err.Error()}
		}
		c.Servers[n] = s
	}
	return c, nil
}
