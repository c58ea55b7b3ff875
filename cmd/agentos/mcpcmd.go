package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentos/agentos/runtime/buildinfo"
	"github.com/agentos/agentos/runtime/event"
	mcpserve "github.com/agentos/agentos/runtime/mcp/serve"
	"github.com/agentos/agentos/schemas"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type mcpServeOpts struct {
	workspace, policy, events, data, http, tokenFile string
}

func mcpServeFlags(fs *flag.FlagSet) *mcpServeOpts {
	var o mcpServeOpts
	fs.StringVar(&o.workspace, "workspace", "", "workspace directory the tools are jailed in (required)")
	fs.StringVar(&o.policy, "policy", "", "operator policy.yaml (default: the built-in policy; the workspace's .agent/policy.yaml may only tighten it)")
	fs.StringVar(&o.data, "data", "", "data directory (default: $AGENTOS_DATA, else the workspace's directory under ~/.local/state/agentos); the events file goes in its mcp/")
	fs.StringVar(&o.events, "events", "", "events.jsonl every call is recorded in (default: DATA/mcp/events.jsonl; answer approvals with agentos tool approve --events FILE)")
	fs.StringVar(&o.http, "http", "", "serve Streamable HTTP on ADDR (host:port, path /mcp) instead of stdio; clients must send the bearer token")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token for --http (default: $AGENTOS_MCP_TOKEN, else a random token printed to stderr)")
	return &o
}

func cmdMCP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErrorf("usage: agentos mcp serve --workspace DIR [--policy FILE] [--data DIR | --events FILE] [--http ADDR]")
	}
	switch args[0] {
	case "serve":
		return mcpServe(ctx, args[1:], stdout, stderr)
	}
	return usageErrorf("agentos mcp: unknown subcommand %q (serve)", args[0])
}

func mcpServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcp serve", flag.ContinueOnError)
	o := mcpServeFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || o.workspace == "" {
		return usageErrorf("usage: agentos mcp serve --workspace DIR [--policy FILE] [--data DIR | --events FILE] [--http ADDR]")
	}
	if o.events == "" {
		data := o.data
		if data == "" {
			data = dataDirFor(o.workspace)
		}
		o.events = filepath.Join(data, "mcp", "events.jsonl")
	}
	if err := os.MkdirAll(filepath.Dir(o.events), 0o755); err != nil {
		return usageErrorf("--events: %v", err)
	}
	k, ws, red, err := toolKernel(o.workspace, o.policy, o.events)
	if err != nil {
		return err
	}
	defer ws.Close()
	sealer, err := event.NewSealer(schemas.MustDefault(), red, nil)
	if err != nil {
		return err
	}
	ef, err := openEventFile(o.events, sealer)
	if err != nil {
		return err
	}
	withSession(k, ef.sid, o.events)
	absEvents, _ := filepath.Abs(o.events)
	hint := fmt.Sprintf("agentos tool approve %%s --workspace %s --events %s", shellQuote(ws.Root()), shellQuote(absEvents))
	if o.policy != "" {
		hint += " --policy " + shellQuote(o.policy)
	}
	srv := mcpserve.New(k, ef, mcpserve.Options{Name: "agentos", Version: buildinfo.Version(), ApproveHint: hint})
	if o.http == "" {
		fmt.Fprintf(stderr, "agentos mcp: serving %d tools of %s on stdio; session %s, events %s\n", len(k.Tools()), ws.Root(), ef.sid, o.events)
		err := srv.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(os.Stdin), Writer: nopWriteCloser{stdout}})
		if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	token, err := mcpToken(o.tokenFile)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.http)
	if err != nil {
		return usageErrorf("--http: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpserve.HTTPHandler(srv, token.value))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "agentos mcp: serving %d tools of %s on http://%s/mcp; session %s, events %s\n", len(k.Tools()), ws.Root(), ln.Addr(), ef.sid, o.events)
	if host, _, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			fmt.Fprintf(stderr, "agentos mcp: warning: %s is reachable from other hosts over plain HTTP: the bearer token travels in clear; put a TLS proxy in front\n", ln.Addr())
		}
	}
	if token.generated {
		fmt.Fprintf(stderr, "agentos mcp: bearer token (send as Authorization: Bearer ...): %s\n", token.value)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		<-errc
		return nil
	}
}

type bearer struct {
	value     string
	generated bool
}

func mcpToken(file string) (bearer, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return bearer{}, usageErrorf("--token-file: %v", err)
		}
		t := strings.TrimSpace(string(b))
		if len(t) < 16 {
			return bearer{}, usageErrorf("--token-file: the token must have at least 16 characters")
		}
		return bearer{value: t}, nil
	}
	if t := strings.TrimSpace(os.Getenv("AGENTOS_MCP_TOKEN")); t != "" {
		if len(t) < 16 {
			return bearer{}, usageErrorf("AGENTOS_MCP_TOKEN must have at least 16 characters")
		}
		return bearer{value: t}, nil
	}
	return bearer{value: mcpserve.NewToken(), generated: true}, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>()*?[]#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
