package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/sandbox"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Error codes of MCP tool calls, next to the kernel's (TIMEOUT,
// OUTPUT_LIMIT, TOOL_RUNTIME_ERROR): a tool.result's error class.
const (
	// CodeServerUnavailable: the server could not be started or reached,
	// or did not complete the MCP handshake.
	CodeServerUnavailable kernel.Code = "MCP_SERVER_UNAVAILABLE"
	// CodeServerCrashed: the server's process exited during the call.
	CodeServerCrashed kernel.Code = "MCP_SERVER_CRASHED"
	// CodeProtocolError: the server answered with something that is not
	// a valid MCP result (or broke the connection while alive).
	CodeProtocolError kernel.Code = "MCP_PROTOCOL_ERROR"
	// CodeToolError: the tool ran and reported an error (isError).
	CodeToolError kernel.Code = "MCP_TOOL_ERROR"
)

// Starter starts a long-running process in the jail (kernel/workspace's
// Root.Command): the OS sandbox, the scrubbed environment less the names
// drop reports, plus env.
type Starter interface {
	Command(ctx context.Context, argv []string, drop func(name string) bool, env []string) (*sandbox.Cmd, error)
}

// Options configure a Mount.
type Options struct {
	// Starter runs stdio servers; nil refuses them.
	Starter Starter
	// Expander resolves ${VAR} references.
	Expander Expander
	// Network is the allow-list (policy.yaml network.allow) an http
	// server's URL must match; empty refuses every http server.
	Network []string
	// Redact masks secrets in server stderr and messages.
	Redact func(string) string
	// StartTimeout bounds starting a server and listing its tools
	// (default 30 s).
	StartTimeout time.Duration
	// MaxMessage bounds one message from a server in bytes (default
	// 4 MiB); a larger one ends the connection (OUTPUT_LIMIT).
	MaxMessage int
	// HTTPClient for http servers (nil: a client without a timeout of its
	// own; calls carry their deadlines).
	HTTPClient *http.Client
}

// Mount is one session's view of its MCP servers. It is safe for
// concurrent use. Close stops every server it started.
type Mount struct {
	opts    Options
	servers map[string]*server
	order   []string
	ctx     context.Context // lives until Close: servers run under it
	cancel  context.CancelFunc
}

// NewMount prepares the servers of cfg; none is started.
func NewMount(cfg *Config, o Options) *Mount {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.MaxMessage <= 0 {
		o.MaxMessage = 4 << 20
	}
	if o.Redact == nil {
		o.Redact = func(s string) string { return s }
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mount{opts: o, servers: map[string]*server{}, ctx: ctx, cancel: cancel}
	if cfg != nil {
		for _, n := range cfg.Names() {
			m.servers[n] = &server{cfg: cfg.Servers[n], m: m}
			m.order = append(m.order, n)
		}
	}
	return m
}

// Servers returns the configured server names, sorted.
func (m *Mount) Servers() []string { return append([]string(nil), m.order...) }

// Close stops every running server.
func (m *Mount) Close() error {
	var errs []error
	for _, n := range m.order {
		errs = append(errs, m.servers[n].stop())
	}
	m.cancel()
	return errors.Join(errs...)
}

// Started reports whether a server's process (or connection) is up.
func (m *Mount) Started(name string) bool {
	s := m.servers[name]
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sess != nil
}

// StartDuration is how long the server's latest start (process start
// and MCP handshake) took; zero if it never started.
func (m *Mount) StartDuration(name string) time.Duration {
	s := m.servers[name]
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startDur
}

// ListTools starts the server if needed and lists its tools (all pages).
func (m *Mount) ListTools(ctx context.Context, name string) ([]*sdk.Tool, error) {
	s := m.servers[name]
	if s == nil {
		return nil, &kernel.Error{Kind: "gate", Code: kernel.CodeToolNotFound, Message: fmt.Sprintf("no MCP server named %q", name)}
	}
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, m.opts.StartTimeout)
	defer cancel()
	var out []*sdk.Tool
	for t, err := range sess.Tools(lctx, nil) {
		if err != nil {
			return nil, s.fault(lctx, "listing tools", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Call calls a tool of a server (starting the server if needed) and
// returns its result. A call that fails returns a *kernel.Error whose
// code says why.
func (m *Mount) Call(ctx context.Context, serverName, tool string, args json.RawMessage) (*CallResult, error) {
	s := m.servers[serverName]
	if s == nil {
		return nil, &kernel.Error{Kind: "gate", Code: kernel.CodeToolNotFound, Message: fmt.Sprintf("no MCP server named %q", serverName)}
	}
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	var a map[string]any
	if len(args) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, &kernel.Error{Kind: "guard", Code: kernel.CodeInvalidArguments, Message: "arguments are not a JSON object: " + err.Error()}
		}
	}
	st := s.stderrTail()
	var mark int64
	if st != nil {
		mark = st.Mark()
	}
	res, err := sess.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: a})
	if err != nil {
		return nil, s.fault(ctx, "calling "+tool, err)
	}
	out := &CallResult{CallToolResult: res}
	if st != nil {
		out.Stderr = m.opts.Redact(st.Since(mark, 4<<10))
	}
	return out, nil
}

// CallResult is a tool's result and what the server wrote to stderr
// during the call (redacted, at most 4 KiB: the last bytes).
type CallResult struct {
	*sdk.CallToolResult
	Stderr string
}

func (s *server) stderrTail() *tail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr
}

// server is one configured server and, once started, its connection.
type server struct {
	cfg Server
	m   *Mount

	mu       sync.Mutex
	sess     *sdk.ClientSession
	cmd      *sandbox.Cmd
	exited   chan struct{} // closed when cmd exits
	exitErr  error
	stderr   *tail
	tooLarge *limitReader
	startDur time.Duration
}

// session returns the live connection, starting the server first if it
// is not running (or its previous process died).
func (s *server) session(ctx context.Context) (*sdk.ClientSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess != nil {
		if !s.dead() {
			return s.sess, nil
		}
		s.stopLocked()
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, s.m.opts.StartTimeout)
	defer cancel()
	sess, err := s.startLocked(sctx)
	if err != nil {
		s.stopLocked()
		return nil, err
	}
	s.sess = sess
	s.startDur = time.Since(start)
	return sess, nil
}

func (s *server) dead() bool {
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

func (s *server) unavailable(msg string, err error) *kernel.Error {
	if err != nil {
		msg += ": " + err.Error()
	}
	return &kernel.Error{Kind: "runtime", Code: CodeServerUnavailable, Message: s.m.opts.Redact(fmt.Sprintf("MCP server %q: %s", s.cfg.Name, msg)), Details: s.details(), Err: err}
}

func (s *server) startLocked(ctx context.Context) (*sdk.ClientSession, error) {
	cfg, err := s.m.opts.Expander.Resolve(s.cfg)
	if err != nil {
		return nil, s.unavailable("configuration", err)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "agentos", Version: "1"}, nil)
	var t sdk.Transport
	switch cfg.Type {
	case TypeStdio:
		if t, err = s.stdioTransport(ctx, cfg); err != nil {
			return nil, err
		}
	case TypeHTTP:
		if t, err = s.httpTransport(cfg); err != nil {
			return nil, err
		}
	default:
		return nil, s.unavailable("unsupported type "+cfg.Type, nil)
	}
	sess, err := client.Connect(ctx, t, nil)
	if err != nil {
		if s.exited != nil {
			// Give a process that died during the handshake a moment to be
			// reaped, so the error says it exited (and with what).
			select {
			case <-s.exited:
			case <-time.After(200 * time.Millisecond):
			}
		}
		what := "the MCP handshake failed"
		if s.dead() {
			what = "the server exited during the MCP handshake (" + exitText(s.exitErr) + ")" + s.startHint(cfg)
		} else if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			what = fmt.Sprintf("the server did not complete the MCP handshake within %s", s.m.opts.StartTimeout)
			err = nil
		}
		return nil, s.unavailable(what, err)
	}
	return sess, nil
}

func (s *server) stdioTransport(ctx context.Context, cfg Server) (sdk.Transport, error) {
	if s.m.opts.Starter == nil {
		return nil, s.unavailable("stdio servers cannot run here (no workspace to run them in)", nil)
	}
	env := make([]string, 0, len(cfg.Env))
	for k, v := range cfg.Env {
		env = append(env, k+"="+v)
	}
	// agentos's own credential variables never reach a server, even where
	// the policy passes them to commands.
	drop := func(name string) bool { return botSecretNames[name] }
	cmd, err := s.m.opts.Starter.Command(s.m.ctx, append([]string{cfg.Command}, cfg.Args...), drop, env)
	if err != nil {
		var ke *kernel.Error
		if errors.As(err, &ke) && ke.Code == kernel.CodeSandboxUnavailable {
			return nil, &kernel.Error{Kind: "sandbox", Code: kernel.CodeSandboxUnavailable, Message: fmt.Sprintf("MCP server %q: %s", s.cfg.Name, ke.Message), Err: err}
		}
		return nil, s.unavailable("cannot prepare the command", err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, s.unavailable("stdin", err)
	}
	// An os.Pipe rather than StdoutPipe: Wait (in the goroutine below)
	// closes a StdoutPipe as soon as the process exits, which could drop
	// the last messages it wrote; our end stays open until read to EOF.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, s.unavailable("stdout", err)
	}
	cmd.Stdout = stdoutW
	s.stderr = newTail(16 << 10)
	cmd.Stderr = s.stderr
	err = cmd.Start()
	stdoutW.Close() // the child holds its own copy
	if err != nil {
		stdout.Close()
		_ = cmd.Finish()
		return nil, s.unavailable("cannot start "+cfg.Command, err)
	}
	s.cmd = cmd
	exited := make(chan struct{})
	s.exited = exited
	go func() {
		err := cmd.Wait()
		s.exitErr = err
		close(exited)
	}()
	s.tooLarge = &limitReader{r: stdout, max: s.m.opts.MaxMessage}
	return &sdk.IOTransport{Reader: readCloser{s.tooLarge, stdout}, Writer: stdin, MaxLineLength: s.m.opts.MaxMessage + 1}, nil
}

func (s *server) httpTransport(cfg Server) (sdk.Transport, error) {
	u, _ := url.Parse(cfg.URL) // Resolve checked it
	if err := s.allowed(u); err != nil {
		return nil, &kernel.Error{Kind: "policy", Code: kernel.CodePolicyDenied, Message: fmt.Sprintf("MCP server %q: %v", s.cfg.Name, err)}
	}
	base := s.m.opts.HTTPClient
	if base == nil {
		// No client timeout: every request carries the call's deadline
		// (the tool's timeout, or StartTimeout for the handshake).
		base = &http.Client{}
	}
	hc := *base
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc.Transport = headerTransport{rt: rt, headers: cfg.Headers}
	// A redirect must not take the connection (and its headers) elsewhere.
	hc.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if err := s.allowed(req.URL); err != nil {
			return err
		}
		return nil
	}
	// No standalone SSE stream: agentos asks, the server answers; nothing
	// server-initiated is used, and a long-lived GET is one more thing to
	// break.
	return &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: &hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil
}

func (s *server) allowed(u *url.URL) error {
	rules, err := sandbox.ParseRules(s.m.opts.Network)
	if err != nil {
		return err
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return err
		}
	}
	host := u.Hostname()
	for _, r := range rules {
		if r.Match(host, port) {
			return nil
		}
	}
	return fmt.Errorf("%s is not in the network allow-list (policy.yaml network.allow)", net.JoinHostPort(host, strconv.Itoa(port)))
}

type headerTransport struct {
	rt      http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	return h.rt.RoundTrip(req)
}

// fault classifies a failed request: the process died (crash), the
// message was too large, the deadline passed (hang), or the answer was
// not valid MCP.
func (s *server) fault(ctx context.Context, what string, err error) error {
	var ke *kernel.Error
	if errors.As(err, &ke) {
		return ke
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited != nil && !s.dead() && ctx.Err() == nil {
		// A broken connection is often a process on its way out: give it a
		// moment, so that a crash is reported as one.
		select {
		case <-s.exited:
		case <-time.After(500 * time.Millisecond):
		}
	}
	red := s.m.opts.Redact
	switch {
	case s.tooLarge != nil && s.tooLarge.exceeded():
		s.stopLocked()
		return &kernel.Error{Kind: "runtime", Code: kernel.CodeOutputLimit, Message: fmt.Sprintf("MCP server %q: %s: a message was larger than %d bytes; the server was stopped", s.cfg.Name, what, s.m.opts.MaxMessage), Details: s.details()}
	case s.dead():
		d := s.details()
		s.stopLocked()
		return &kernel.Error{Kind: "runtime", Code: CodeServerCrashed, Message: red(fmt.Sprintf("MCP server %q exited while %s (%s); it is restarted on next use", s.cfg.Name, what, exitText(s.exitErr))), Details: d, Err: err}
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return &kernel.Error{Kind: "runtime", Code: kernel.CodeTimeout, Message: fmt.Sprintf("MCP server %q: %s: no answer before the deadline", s.cfg.Name, what), Details: s.details(), Err: err}
	case errors.Is(err, sdk.ErrConnectionClosed):
		d := s.details()
		s.stopLocked()
		return &kernel.Error{Kind: "runtime", Code: CodeProtocolError, Message: red(fmt.Sprintf("MCP server %q: %s: the connection broke (malformed output?): %v", s.cfg.Name, what, err)), Details: d, Err: err}
	}
	// Anything else is a broken exchange: the connection cannot be
	// trusted to carry the next call, so the server restarts on next use.
	d := s.details()
	s.stopLocked()
	return &kernel.Error{Kind: "runtime", Code: CodeProtocolError, Message: red(fmt.Sprintf("MCP server %q: %s: %v; it is restarted on next use", s.cfg.Name, what, err)), Details: d, Err: err}
}

// startHint says why a stdio server that died at start may have: the last
// of its stderr, and, for a package runner (npx, uvx…) in a sandbox
// without the registry in the network allow-list, that it could not
// download the server.
func (s *server) startHint(cfg Server) string {
	var hint string
	if s.stderr != nil {
		if t := strings.TrimSpace(s.stderr.String()); t != "" {
			if len(t) > 400 {
				t = "…" + t[len(t)-400:]
			}
			hint += "; its stderr ends: " + strings.ReplaceAll(t, "\n", " | ")
		}
	}
	registry := runnerRegistry(cfg.Command)
	if cfg.Type == TypeStdio && registry != "" && len(s.m.opts.Network) == 0 {
		hint += fmt.Sprintf("; %s downloads the server when it is not installed, and commands have no network: install it where commands can read it (AGENTOS_SANDBOX_READONLY), or let the policy's network.allow name %s", filepath.Base(cfg.Command), registry)
	}
	return hint
}

// details is the diagnostic part of an error: the server and its stderr
// (capped, redacted).
func (s *server) details() map[string]any {
	d := map[string]any{"server": s.cfg.Name, "type": s.cfg.Type}
	if s.stderr != nil {
		if t := s.stderr.String(); t != "" {
			d["stderr"] = s.m.opts.Redact(t)
		}
	}
	return d
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func (s *server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

// stopLocked closes the connection and makes sure the process tree is
// gone: closing stdin asks politely, the sandbox kills the rest.
func (s *server) stopLocked() error {
	var err error
	if s.sess != nil {
		done := make(chan struct{})
		go func(sess *sdk.ClientSession) { _ = sess.Close(); close(done) }(s.sess)
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
		s.sess = nil
	}
	if s.cmd != nil {
		if s.exited != nil {
			select {
			case <-s.exited:
			case <-time.After(time.Second):
			}
		}
		s.cmd.Kill()
		if s.exited != nil {
			<-s.exited
		}
		err = s.cmd.Finish()
		s.cmd = nil
	}
	return err
}

type readCloser struct {
	io.Reader
	io.Closer
}

// tail keeps the last n bytes written.
type tail struct {
	mu      sync.Mutex
	buf     []byte
	n       int
	dropped int
	total   int64 // bytes ever written
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	t.total += int64(len(p))
	if over := len(t.buf) - t.n; over > 0 {
		t.dropped += over
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// Mark is the position of the next byte written.
func (t *tail) Mark() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// Since returns what was written after mark, at most max bytes (the
// last ones).
func (t *tail) Since(mark int64, max int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.total - mark
	if n <= 0 {
		return ""
	}
	if n > int64(len(t.buf)) {
		n = int64(len(t.buf))
	}
	out := t.buf[len(t.buf)-int(n):]
	if len(out) > max {
		return fmt.Sprintf("[%d bytes dropped]\n%s", len(out)-max, out[len(out)-max:])
	}
	return string(out)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped > 0 {
		return fmt.Sprintf("[%d earlier bytes dropped]\n%s", t.dropped, t.buf)
	}
	return string(t.buf)
}

// limitReader fails a line (one JSON-RPC message) longer than max bytes.
type limitReader struct {
	r    io.Reader
	max  int
	line int
	mu   sync.Mutex
	over bool
}

var errTooLarge = errors.New("MCP message over the size limit")

func (l *limitReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' {
			l.line = 0
			continue
		}
		l.line++
		if l.line > l.max {
			l.mu.Lock()
			l.over = true
			l.mu.Unlock()
			return 0, errTooLarge
		}
	}
	return n, err
}

func (l *limitReader) exceeded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.over
}

// ReadConfigFile reads dir/.mcp.json through fsys-like access: read
// returns the file's bytes or an error satisfying errors.Is(err,
// os.ErrNotExist) when there is none (nil config, no error).
func ReadConfigFile(read func(string) ([]byte, error)) (*Config, error) {
	b, err := read(ConfigFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &ConfigError{File: ConfigFile, Msg: err.Error()}
	}
	return ParseConfig(ConfigFile, bytes.NewReader(b))
}
