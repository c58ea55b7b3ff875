package mcp

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentos/agentos/kernel"
)

// Failure is an MCP server that did not start or list its tools: the
// payload of the mcp.server_failed event a run records (its tools are not
// offered), with what the user can do about it.
type Failure struct {
	Server    string `json:"server"`
	Transport string `json:"transport,omitempty"`
	// Command is the stdio server's command line, or the HTTP server's
	// URL, redacted.
	Command string `json:"command,omitempty"`
	Error   string `json:"error"`
	// StderrTail is the end of the server's stderr, redacted.
	StderrTail string `json:"stderr_tail,omitempty"`
	Hint       string `json:"hint,omitempty"`
}

// maxStderrTail bounds the stderr a Failure carries.
const maxStderrTail = 2000

// failure describes a server whose start or tool listing failed with err.
func (m *Mount) failure(name string, err error) Failure {
	f := Failure{Server: name, Error: m.opts.Redact(err.Error())}
	s := m.servers[name]
	if s == nil {
		return f
	}
	cfg := s.cfg
	f.Transport = cfg.Type
	switch cfg.Type {
	case TypeStdio:
		f.Command = m.opts.Redact(strings.Join(append([]string{cfg.Command}, cfg.Args...), " "))
	case TypeHTTP:
		f.Command = m.opts.Redact(cfg.URL)
	}
	if st := s.stderrTail(); st != nil {
		if t := strings.TrimSpace(st.String()); t != "" {
			if len(t) > maxStderrTail {
				t = "…" + t[len(t)-maxStderrTail:]
			}
			f.StderrTail = m.opts.Redact(t)
		}
	}
	f.Hint = m.failureHint(cfg, err)
	return f
}

// runnerRegistry is where a package runner downloads a server from.
func runnerRegistry(command string) string {
	return map[string]string{"npx": "registry.npmjs.org:443", "bunx": "registry.npmjs.org:443", "pnpx": "registry.npmjs.org:443",
		"uvx": "pypi.org:443 and files.pythonhosted.org:443", "pipx": "pypi.org:443 and files.pythonhosted.org:443"}[filepath.Base(command)]
}

// failureHint is what to do about a failed server: for a package runner
// (npx -y, uvx) with no network, install the server or allow its
// registry; for a sandbox that cannot run commands, agentos doctor; else
// run the command by hand.
func (m *Mount) failureHint(cfg Server, err error) string {
	var ke *kernel.Error
	if errors.As(err, &ke) && ke.Code == kernel.CodeSandboxUnavailable {
		return "commands cannot run in this sandbox, MCP servers neither: `agentos doctor` says why and how to fix it"
	}
	if cfg.Type == TypeHTTP {
		return fmt.Sprintf("check that %s answers, and that the policy's network.allow names its host", m.opts.Redact(cfg.URL))
	}
	if reg := runnerRegistry(cfg.Command); reg != "" && len(m.opts.Network) == 0 {
		return fmt.Sprintf("%s downloads the server when it is not installed, and commands have no network: install the package where commands can read it (a local `npm install` in the repository, or a directory named in AGENTOS_SANDBOX_READONLY), or add %s to network.allow in policy.yaml", filepath.Base(cfg.Command), reg)
	}
	return fmt.Sprintf("run `%s` by hand in the repository to see why it does not start", m.opts.Redact(strings.Join(append([]string{cfg.Command}, cfg.Args...), " ")))
}
