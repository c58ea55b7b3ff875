// Command benchserver is the server side of the webhook benchmark (see
// bench/loadtest/run.sh). It serves POST /webhook on a loopback
// address in one of two ways:
//
//	-kind ours  the bot's intake as `agentos serve` runs it: the
//	            bot/server engine + webhook.Handler + the LogQueue
//	            in -dir (every delivery durable before 202); with
//	            -process, also a worker.Processor that decodes each
//	            delivery fully and dispatches it to a counter
//	-kind bare  the baseline most Go bots start from: net/http with
//	            go-github ValidatePayload + ParseWebHook, nothing stored
//
// It prints "listening on <addr>" once it accepts connections and stops
// cleanly on SIGINT/SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/server"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/bot/worker"
	"github.com/google/go-github/v62/github"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchserver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kind := fs.String("kind", "ours", "ours | bare")
	addr := fs.String("addr", "127.0.0.1:0", "listen address (loopback only)")
	secret := fs.String("secret", "", "webhook secret (required)")
	dir := fs.String("dir", "", "directory of the queue (ours; default: a new temp dir, removed on exit)")
	process := fs.Bool("process", false, "ours: also run the Processor (full decode + dispatch)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	commitDelay := fs.Duration("commit-delay", 0, "log queue: commit delay (0: the default, negative: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secret == "" {
		return errors.New("-secret is required")
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-addr %s: only loopback addresses are allowed", *addr)
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}

	if *kind != "ours" && *kind != "bare" {
		return fmt.Errorf("-kind %q: want ours or bare", *kind)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	if *kind == "bare" {
		return runBare(ctx, ln, []byte(*secret), stdout)
	}
	hook, finish, err := ours(ctx, *dir, *commitDelay, []byte(*secret), *process, stderr)
	if err != nil {
		ln.Close()
		return err
	}
	// The server `agentos serve` runs: its middleware (request ids,
	// request log, recovery) and its timeouts.
	srv, err := server.New(server.Options{Listener: ln, WebhookPath: "/webhook", Webhook: hook.Serve,
		Logger: slog.New(slog.NewTextHandler(stderr, nil))})
	if err != nil {
		ln.Close()
		return errors.Join(err, finish())
	}
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	return errors.Join(srv.Run(ctx), finish())
}

// runBare serves the minimal handler on ln until ctx ends.
func runBare(ctx context.Context, ln net.Listener, secret []byte, stdout io.Writer) error {
	srv := &http.Server{Handler: bare(secret), ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := srv.Shutdown(sctx)
		<-serveErr
		return err
	}
}

// outcomes counts the handler's answers (a webhook.Observer).
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) Delivery(event, outcome string) {
	o.mu.Lock()
	o.n[outcome]++
	o.mu.Unlock()
}

// counter is the Processor's Dispatcher in the benchmark.
type counter struct{ n atomic.Int64 }

func (c *counter) Dispatch(ctx context.Context, t webhook.Trigger) error {
	c.n.Add(1)
	return nil
}

func ours(ctx context.Context, dir string, commitDelay time.Duration, secret []byte, process bool, stderr io.Writer) (*webhook.Handler, func() error, error) {
	cleanup := func() error { return nil }
	if dir == "" {
		d, err := os.MkdirTemp("", "agentos-webhook-bench-")
		if err != nil {
			return nil, nil, err
		}
		dir, cleanup = d, func() error { return os.RemoveAll(d) }
	}
	q, err := queue.OpenLogQueueOptions(filepath.Join(dir, "webhooks.log.d"), queue.LogOptions{CommitDelay: commitDelay})
	if err != nil {
		return nil, nil, errors.Join(err, cleanup())
	}
	obs := &outcomes{n: map[string]int{}}
	h := webhook.NewHandler(webhook.Config{Secrets: [][]byte{secret}, Events: dispatch.Events()}, q, obs)

	var wg sync.WaitGroup
	c := &counter{}
	pctx, stopProcessor := context.WithCancel(context.WithoutCancel(ctx))
	if process {
		p := &worker.Processor{Events: dispatch.Events(), Queue: q, Dispatch: c, BotLogin: "agentos-bench[bot]"}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Run(pctx); err != nil {
				fmt.Fprintln(stderr, "processor:", err)
			}
		}()
	}
	finish := func() error {
		stopProcessor()
		wg.Wait()
		depth, derr := q.Depth(context.Background())
		obs.mu.Lock()
		fmt.Fprintf(stderr, "benchserver: answers %v, dispatched %d, queue depth %d\n", obs.n, c.n.Load(), depth)
		obs.mu.Unlock()
		return errors.Join(derr, q.Close(), cleanup())
	}
	return h, finish, nil
}

func bare(secret []byte) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhook", func(w http.ResponseWriter, r *http.Request) {
		payload, err := github.ValidatePayload(r, secret)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		ev, err := github.ParseWebHook(github.WebHookType(r), payload)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if e, ok := ev.(*github.IssueCommentEvent); ok && e.GetAction() == "created" {
			_ = e.GetComment().GetBody()
		}
		w.WriteHeader(http.StatusAccepted)
	})
	return mux
}
