package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/bot/server"
	"github.com/agentos/agentos/bot/viewer"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/schemas"
)

type viewOptions struct {
	addr, server *string
	asJSON       *bool
}

func viewFlags(fs *flag.FlagSet) viewOptions {
	return viewOptions{
		addr:   fs.String("addr", "127.0.0.1:0", "listen address (loopback; port 0 picks a free one)"),
		server: fs.String("server", "", "print SESSION as this agentos server shows it, with the token of agentos login (default $"+envServer+" when the argument is no file)"),
		asJSON: fs.Bool("json", false, "with --server: print the server's snapshot as JSON"),
	}
}

// cmdView serves one events.jsonl as the run viewer's page, read-only, on
// the loopback interface, until interrupted: no GitHub, no sign-in, no
// answers.
func cmdView(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("view", flag.ContinueOnError)
	o := viewFlags(fs)
	addr := o.addr
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("usage: agentos view <events.jsonl> [--addr 127.0.0.1:0], or agentos view --server URL SESSION")
	}
	if *o.server != "" {
		return viewRemote(ctx, *o.server, pos[0], *o.asJSON, stdout)
	}
	if _, err := os.Stat(pos[0]); err != nil && os.Getenv(envServer) != "" {
		return viewRemote(ctx, "", pos[0], *o.asJSON, stdout)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return usageErrorf("view: --addr %q: %v", *addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		// The page is served without access control: it must not leave
		// this machine.
		return usageErrorf("view: --addr %s is not a loopback address; agentos view serves without sign-in, so it listens on 127.0.0.1 or ::1 only", *addr)
	}
	path := pos[0]
	f, err := os.Open(path)
	if err != nil {
		return usageErrorf("view: %v", err)
	}
	rep, err := replay.VerifyReader(schemas.MustDefault(), f)
	f.Close()
	if err != nil {
		return fmt.Errorf("view: %s: %w", path, err)
	}
	if !rep.Valid {
		return fmt.Errorf("view: %s does not verify (%v); `agentos verify %s` says more", path, rep.Problem, path)
	}
	f, err = os.Open(path)
	if err != nil {
		return err
	}
	evs, err := viewer.ReadEvents(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("view: %s: %w", path, err)
	}
	st, err := viewer.NewFileStore(evs)
	if err != nil {
		return fmt.Errorf("view: %s: %w", path, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ck, err := access.New(access.Options{Open: true})
	if err != nil {
		return err
	}
	a, err := api.New(api.Options{Store: st, Access: ck, Poll: -1, Logger: log})
	if err != nil {
		return err
	}
	v, err := viewer.New(viewer.Options{Store: st, Access: ck, Lister: a, ReadOnly: true, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("view: listen on %s: %w", *addr, err)
	}
	fmt.Fprintf(stdout, "Serving %s (session %s, %d events, read-only) at http://%s/runs/%s\nPress Ctrl-C to stop.\n", path, st.SessionID(), len(evs), ln.Addr(), st.SessionID())
	opts := server.Options{Listener: ln, Actors: []func(context.Context) error{a.Run, v.Run}, OnShutdown: []func(){a.EndStreams}, Logger: log, LoopbackOnly: true}
	// cmd does not import gin; the route funcs' type comes from the field.
	opts.Routes = append(opts.Routes, a.Register, v.Register)
	srv, err := server.New(opts)
	if err != nil {
		ln.Close()
		return err
	}
	return srv.Run(ctx)
}
