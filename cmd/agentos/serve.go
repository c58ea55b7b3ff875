package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/server"
	"github.com/agentos/agentos/bot/viewer"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/bot/worker"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/runtime/buildinfo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/tracing"
)

// webhookQueueDir is the delivery queue's directory in the data directory
// (next to the event store): an append-only, group-committed log
// (queue.LogQueue); an SQLite queue cost about twice its CPU per
// delivery and was removed.
const webhookQueueDir = "webhooks.log.d"

// serveDeps is what a real process takes from its surroundings; tests
// inject their own.
type serveDeps struct {
	getenv   func(string) string
	listener net.Listener // nil: listen on the configured address
	logger   *slog.Logger // nil: text to stderr
	// dispatch receives the webhook Triggers; nil leaves the deliveries
	// queued (durably) with no processor running.
	dispatch worker.Dispatcher
	// apiTakeoverEvery, when set, is the interval of the takeover of
	// orphaned API runs instead of apiTakeoverEvery (tests).
	apiTakeoverEvery time.Duration
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return serve(ctx, args, stderr, serveDeps{getenv: os.Getenv})
}

// serve runs the server until ctx ends (SIGINT/SIGTERM in main).
func serve(ctx context.Context, args []string, stderr io.Writer, d serveDeps) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	flags := config.BindFlags(fs)
	drainFlag := fs.String("drain-timeout", "", "on SIGTERM, how long runs and deliveries in flight may go on before they are cut and handed to another replica (default "+defaultDrainTimeout.String()+"; env AGENTOS_DRAIN_TIMEOUT)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("usage: agentos serve [--addr HOST:PORT] [--data DIR] [--config FILE] [--drain-timeout DURATION]")
	}
	cfg, err := flags.Load(d.getenv)
	if err != nil {
		return usageErrorf("serve: %v", err)
	}
	drain, err := drainTimeout(*drainFlag, d.getenv("AGENTOS_DRAIN_TIMEOUT"))
	if err != nil {
		return usageErrorf("serve: %v", err)
	}
	// The runs of this process, stopped at their next step on SIGTERM.
	var managers []*agentrun.Manager
	level, err := logLevel(d.getenv("AGENTOS_LOG_LEVEL"))
	if err != nil {
		return usageErrorf("serve: %v", err)
	}
	log := d.logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	}
	log.Info("agentos serve", "version", buildinfo.Version(), "config", cfg)
	sb, err := serverSandbox(ctx, cfg)
	if err != nil {
		return usageErrorf("serve: %v", err)
	}
	logSandbox(log, sb)

	runs, prof, err := serveProfile(cfg, d, log)
	if err != nil {
		return err
	}
	if runs {
		if err := serveProviderCheck(ctx, prof, log); err != nil {
			return err
		}
	}
	vs, err := loadViewerSettings(d.getenv)
	if err != nil {
		return usageErrorf("serve: %v", err)
	}
	secrets := append([]string{cfg.APIToken, cfg.GitHubToken, string(cfg.GitHubPrivateKey), prof.APIKey, urlPassword(cfg.StoreURL)}, cfg.WebhookSecrets...)
	secrets = append(secrets, vs.secrets()...)
	// The store redacts with the operator policy's keys, as `agentos run`
	// does, plus every secret this process holds.
	pol, err := loadPolicy(cfg.PolicyFile, nil)
	if err != nil {
		return err
	}
	sealer, err := newSealer(pol.Redaction.Keys, secrets...)
	if err != nil {
		return err
	}
	be, err := openBackends(ctx, cfg, sealer, log)
	if err != nil {
		return err
	}
	defer be.Close()
	st := be.store
	log.Info("event store", "backend", be.kind)
	// Runs append through runStore: metered (store errors, terminal
	// reports by class, takeovers) and, with OpenTelemetry on, every
	// appended event also becomes spans (one trace per run).
	metrics := api.NewMetrics()
	var runStore store.Store = metrics.Store(st, log)
	obs, stopOTel, err := otelTracing(ctx, d.getenv, log)
	if err != nil {
		return usageErrorf("serve: %v", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopOTel(sctx); err != nil {
			log.Warn("flushing OpenTelemetry spans failed", "error", err)
		}
	}()
	traceIDs := func(m *agentrun.Manager) *agentrun.Manager { return m }
	if obs != nil {
		obs.Provider = prof.Provider
		runStore = tracedStore{Store: runStore, o: obs}
		traceIDs = func(m *agentrun.Manager) *agentrun.Manager { m.TraceID = tracing.TraceID; return m }
	}

	// Session leases (PostgreSQL replicas): the bot and the API hold one
	// while they change a session.
	leases, err := be.leases(ctx, log)
	if err != nil {
		return err
	}
	if leases != nil {
		defer leases.Close()
	}
	var apiRuns api.Runs
	var apiTakeovers *apiTakeover
	if runs {
		mgr := traceIDs(agentrun.NewManager(runStore))
		mgr.Logs = agentrun.DirLogs(cfg.DataDir) // recovery from the exported logs
		managers = append(managers, mgr)
		sr := &serveRuns{store: runStore, mgr: mgr, models: metrics, dataDir: cfg.DataDir, policyFile: cfg.PolicyFile, profile: prof, roots: cfg.RepoRoots, log: log, sandbox: sb}
		if leases != nil {
			sr.leases = leases
		}
		apiRuns = sr
		// API runs no process runs (this one stopped or was killed, or
		// handed one back in a store outage) are taken over (apitakeover.go).
		apiTakeovers = newAPITakeover(sr, cfg.MaxRuns, drain, log)
		if d.apiTakeoverEvery > 0 {
			apiTakeovers.every = d.apiTakeoverEvery
		}
	}
	ck, err := vs.checkerWith(cfg.APIToken, cfg.GitHubAPIURL)
	if err != nil {
		return usageErrorf("serve: %v", err)
	}
	oauth, err := vs.oauth(cfg.GitHubAPIURL)
	if err != nil {
		return usageErrorf("serve: %v", err)
	}
	apiOpts := api.Options{Store: st, Runs: apiRuns, Token: cfg.APIToken, Access: ck, Metrics: metrics, KeepAlive: cfg.SSEKeepAlive, MaxRuns: cfg.MaxRuns, Logger: log, Sandbox: sb.Report(),
		Grace: drain} // the API's runs get the drain time too
	var q serveQueue
	if cfg.WebhookEnabled() {
		if q, err = be.queue(ctx); err != nil {
			return err
		}
		defer q.Close()
		apiOpts.Deliveries = q
	}
	be.start()
	a, err := api.New(apiOpts)
	if err != nil {
		return err
	}
	switch {
	case cfg.APIToken == "":
		log.Warn("the API's write endpoints are disabled: set AGENTOS_API_TOKEN to start runs and answer approvals over HTTP")
	case len(cfg.RepoRoots) == 0:
		log.Warn("repo_roots is not set: an API client may run the agent in any directory this process can open")
	}
	opts := server.Options{
		Addr:       cfg.Addr,
		Listener:   d.listener,
		Actors:     []func(context.Context) error{a.Run},
		OnShutdown: []func(){a.EndStreams},
		Logger:     log,
	}
	vopts := viewer.Options{Store: st, Access: ck, Lister: a, OAuth: oauth, Logger: log}
	var answers viewerAnswers // its dispatcher is set once the bot has learned its login, below
	if vs.signIn() {
		vopts.Answerer = &answers
	}
	// cmd does not import gin; the route func's type comes from the field.
	opts.Routes = append(opts.Routes, a.Register)
	// Retention (retention.go): finished deliveries and ended sessions.
	ret := &retention{cfg: cfg.Retention, store: st, log: log, now: time.Now, deleted: metrics}
	if cfg.WebhookEnabled() {
		ret.queue = q
	}
	opts.Actors = append(opts.Actors, ret.run)
	if apiTakeovers != nil {
		opts.Actors = append(opts.Actors, func(actx context.Context) error { return apiTakeovers.run(ctx, actx) })
	}

	if cfg.WebhookEnabled() {
		secrets := make([][]byte, len(cfg.WebhookSecrets))
		for i, s := range cfg.WebhookSecrets {
			secrets[i] = []byte(s)
		}
		h := webhook.NewHandler(webhook.Config{Secrets: secrets, Events: dispatch.Events()}, q, metrics)
		opts.WebhookPath, opts.Webhook = cfg.WebhookPath, h.Serve
		metrics.SetQueueDepth(func() float64 {
			qctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := q.Depth(qctx)
			if err != nil {
				return math.NaN()
			}
			return float64(n)
		})
		wireOldestClaim(metrics, q)
		metrics.SetDeadLetters(func() float64 {
			qctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := q.Dead(qctx)
			if err != nil {
				return math.NaN()
			}
			return float64(n)
		})
		switch {
		case d.dispatch != nil:
			p := &worker.Processor{Events: dispatch.Events(), Queue: q, Dispatch: d.dispatch, BotLogin: cfg.BotLogin, Observer: metrics, Workers: cfg.Workers, Logger: log,
				DrainTimeout: drain, StopCause: drainCut(drain)}
			opts.Actors = append(opts.Actors, p.Run)
		case runs && cfg.GitHubAuth() != config.AuthNone:
			// Read from the environment serverSandbox reads it from.
			caches, err := serveBuildCaches(os.Getenv, cfg.DataDir, sb, log)
			if err != nil {
				return usageErrorf("serve: %v", err)
			}
			shared, err := be.sharedCache(ctx)
			if err != nil {
				return err
			}
			bot, err := dispatch.NewGitHubBotOver(cfg, runStore, meteredEngines(runStore, cfg.PolicyFile, prof, sb, caches, metrics, func(sid, n string) { log.Warn("repository configuration note", "session", sid, "note", n) }), log, dispatch.ClientOptions{Transport: metrics.Transport(nil), Shared: shared})
			if err != nil {
				return usageErrorf("serve: %v", err)
			}
			traceIDs(bot.Runs)
			managers = append(managers, bot.Runs)
			bo := dispatch.BotOptions{Preflight: botPreflight(prof), Sandbox: string(sb.Mechanism())}
			if leases != nil {
				bo.Leases = leases
			}
			if strings.HasPrefix(vs.publicURL, "https://") {
				bo.ViewerBase = vs.publicURL
			}
			if rec := reconciler(bot.Client, q, leases, log); rec != nil {
				opts.Actors = append(opts.Actors, rec)
			}
			answers.wired = true
			opts.Actors = append(opts.Actors, func(ctx context.Context) error {
				disp, err := bot.Dispatcher(ctx, bo)
				if ctx.Err() != nil {
					return nil // shut down before GitHub answered
				}
				if err != nil {
					return err
				}
				if leases != nil {
					// A cancel another replica asks of a run this one
					// works (none runs here before the dispatcher exists).
					leases.OnCancel(disp.CancelRequested)
				}
				answers.set(disp)
				login := disp.BotLogin()
				log.Info("processing webhook deliveries", "bot_login", login)
				if vs.signIn() {
					// The viewer checks maintainers like commands: the
					// same authorizer, which knows the bot's own login.
					ck.SetAuthorizer(disp.Authorizer())
				}
				p := &worker.Processor{Events: dispatch.Events(), Queue: q, Dispatch: disp, BotLogin: login, Observer: metrics, Workers: cfg.Workers, Logger: log,
					DrainTimeout: drain, StopCause: drainCut(drain)}
				return p.Run(ctx)
			})
		default:
			log.Warn("webhook deliveries are verified and queued, but not processed: the bot needs GitHub credentials and a provider profile")
		}
		if cfg.GitHubAuth() == config.AuthNone {
			log.Warn("no GitHub credentials (AGENTOS_GITHUB_TOKEN, or AGENTOS_GITHUB_APP_ID with AGENTOS_GITHUB_PRIVATE_KEY_FILE): deliveries are accepted, but the bot cannot check permissions, comment, push or open pull requests")
		}
	} else {
		log.Warn("webhook intake is off: set AGENTOS_WEBHOOK_SECRET (the app's webhook secret) to receive GitHub deliveries at " + cfg.WebhookPath)
	}

	if vs.signIn() && !answers.wired {
		log.Warn("sign-in with GitHub is configured, but the bot has no GitHub credentials or webhook intake: signed-in maintainers see nothing until it has")
		vopts.Answerer = nil
	}
	v, err := viewer.New(vopts)
	if err != nil {
		return err
	}
	opts.Routes = append(opts.Routes, v.Register)
	opts.Actors = append(opts.Actors, v.Run)

	srv, err := server.New(opts)
	if err != nil {
		return err
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-stopped:
		case <-ctx.Done():
			// A graceful stop: runs stop at their next step (the call in
			// progress is let finish, for up to the drain time), record
			// run.interrupted, and hand their session back at once.
			log.Info("stopping: runs stop at their next step and are handed to another replica", "drain_timeout", drain)
			for _, m := range managers {
				m.Stop(fmt.Errorf("%w: agentos serve was asked to stop (SIGTERM); the run stopped at its next step", agentrun.ErrStopping))
			}
		}
	}()
	return srv.Run(ctx)
}

// defaultDrainTimeout fits Kubernetes' default 30 s grace period between
// SIGTERM and SIGKILL, with time left to record and hand back.
const defaultDrainTimeout = 25 * time.Second

// drainTimeout is --drain-timeout, else AGENTOS_DRAIN_TIMEOUT, else the
// default.
func drainTimeout(flagValue, env string) (time.Duration, error) {
	v, name := flagValue, "--drain-timeout"
	if v == "" {
		v, name = env, "AGENTOS_DRAIN_TIMEOUT"
	}
	if v == "" {
		return defaultDrainTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive duration such as 25s", name, v)
	}
	return d, nil
}

// drainCut is the cause a delivery still in flight when the drain time
// ends is cut with: its run records run.interrupted, not a timeout.
func drainCut(drain time.Duration) error {
	return fmt.Errorf("%w: agentos serve was asked to stop (SIGTERM) and its drain time (%s) ran out with a call still in progress", agentrun.ErrStopping, drain)
}

// serveProfile loads the provider profile runs use. A profile file that
// does not load is an error; without one, an invalid default (the scripted
// provider without a script) only disables runs, so that intake and the
// read API still work.
func serveProfile(cfg config.Config, d serveDeps, log *slog.Logger) (bool, provider.Profile, error) {
	prof, err := provider.LoadProfile(cfg.ProfileFile, d.getenv)
	switch {
	case err == nil:
		return true, prof, nil
	case cfg.ProfileFile != "":
		return false, prof, usageErrorf("serve: %v", err)
	}
	log.Warn("runs are disabled: no usable provider profile (set profile: in the config file, or AGENTOS_PROVIDER and its settings)", "error", err)
	return false, prof, nil
}

// serveProviderCheck logs the resolved provider and checks it. A rejected
// key or an unknown model stops the server: no run could succeed. An
// unreachable or unavailable endpoint does not: a local model server may
// start after the bot, and each new run checks again (providerPreflight)
// before anything is posted to GitHub.
func serveProviderCheck(ctx context.Context, prof provider.Profile, log *slog.Logger) error {
	log.Info("provider", "resolved", prof.Describe())
	err := providerPreflight(prof)(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, provider.ErrKeyRejected) || errors.Is(err, provider.ErrUnknownModel):
		return usageErrorf("serve: %v", err)
	case errors.Is(err, provider.ErrUnreachable):
		log.Error("the model endpoint does not answer; runs will fail until it does", "error", err)
		return nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	log.Warn("the model endpoint is unavailable right now", "error", err)
	return nil
}

// serveRuns starts runs for the API with the same assembly as `agentos
// run` (runtime/setup) over the repository each run works in, on the
// server's one store and one Manager, so event streams see appends at once
// and a session has one active run in this process.
type serveRuns struct {
	store      store.Store
	mgr        *agentrun.Manager // over store
	dataDir    string
	policyFile string
	profile    provider.Profile
	roots      []string // allowed repository parents; empty: any
	log        *slog.Logger
	sandbox    *sandbox.Sandbox
	models     provider.ModelObserver // the server's model metrics
	// leases, with replicas, make one replica at a time answer or run a
	// session; nil: this process's Manager serialises runs.
	leases dispatch.SessionLeases
	// apiWork keeps the takeover of orphaned API runs off the sessions this
	// process's API runs work (apitakeover.go).
	apiWork
}

// lease takes the session's lease when replicas share the store; a
// session leased by another replica is webhook.ErrBusy (the API answers
// 409).
func (r *serveRuns) lease(ctx context.Context, sessionID string) (func(), error) {
	if r.leases == nil {
		return func() {}, nil
	}
	release, err := r.leases.Acquire(ctx, sessionID)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", webhook.ErrBusy, err)
	}
	return release, nil
}

// Prepare implements api.Runs.
func (r *serveRuns) Prepare(ctx context.Context, req api.StartRequest) (api.Run, error) {
	repo := req.RepoDir
	if repo == "" {
		var err error
		if repo, err = r.repoOf(ctx, req.SessionID); err != nil {
			return nil, err
		}
	}
	abs, err := r.allowed(repo)
	if err != nil {
		return nil, err
	}
	env, err := r.build(ctx, abs, req.SessionID)
	if err != nil {
		return nil, err
	}
	key := req.SessionKey
	if key == "" {
		key = "api:" + abs
	}
	start := agentrun.StartRequest{SessionID: req.SessionID, Prompt: req.Prompt, SessionKey: key, Trigger: map[string]any{"source": "api", "repo_dir": abs}, Cwd: env.Workspace.Root()}
	return &serveRun{r: r, env: env, sessionID: req.SessionID, start: &start}, nil
}

// PrepareResume implements api.Runs: the run resumes in the repository its
// run.started recorded.
func (r *serveRuns) PrepareResume(ctx context.Context, sessionID string) (api.Run, error) {
	repo, err := r.repoOf(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if repo, err = r.allowed(repo); err != nil {
		return nil, err
	}
	env, err := r.build(ctx, repo, sessionID)
	if err != nil {
		return nil, err
	}
	return &serveRun{r: r, env: env, sessionID: sessionID}, nil
}

// Resolve implements api.Runs.
func (r *serveRuns) Resolve(ctx context.Context, sessionID, approvalID, decision, by, reason string) error {
	release, err := r.lease(ctx, sessionID)
	if err != nil {
		return err
	}
	defer release()
	return r.mgr.Resolve(ctx, sessionID, approvalID, decision, by, reason)
}

// Cancel implements api.Canceller: the RunManager's cancel path. A paused
// run's exported log is rewritten here; a running run's is written by its
// own Execute when it ends.
func (r *serveRuns) Cancel(ctx context.Context, sessionID, by, reason string) (agentrun.Outcome, error) {
	running := r.mgr.Running(sessionID)
	out, err := r.mgr.Cancel(ctx, sessionID, by, reason)
	if errors.Is(err, agentrun.ErrNotPaused) && !running {
		// Another replica may be running it: ask that one.
		if c, ok := r.leases.(dispatch.CancelRequester); ok {
			if held, rerr := c.RequestCancel(ctx, sessionID, by, reason); rerr != nil {
				return out, errors.Join(err, rerr)
			} else if held {
				return out, api.ErrCancelRequested
			}
		}
	}
	if err != nil || running {
		return out, err
	}
	if _, err := exportSession(ctx, r.store, r.dataDir, sessionID); err != nil {
		return out, fmt.Errorf("export session log: %w", err)
	}
	return out, nil
}

func (r *serveRuns) build(ctx context.Context, repo, sessionID string) (*setup.Env, error) {
	// The runtime keeps the context for its whole life (trust lookups),
	// and Prepare's is the HTTP request's, which ends with the response.
	env, err := setup.Build(context.WithoutCancel(ctx), setup.Options{Dir: repo, DataDir: r.dataDir, PolicyFile: r.policyFile, Profile: r.profile, Providers: observed(providers(nil), r.models), SessionID: sessionID, Store: r.store, Sandbox: r.sandbox, Runs: r.mgr})
	if err != nil {
		return nil, err
	}
	for _, n := range env.Notes {
		r.log.Info("run note", "session", sessionID, "note", n)
	}
	return env, nil
}

// allowed resolves repo (symbolic links too, so that a link cannot lead
// out of a root) and checks that it lies under one of the repo roots.
func (r *serveRuns) allowed(repo string) (string, error) {
	abs, err := filepath.Abs(repo)
	if err != nil {
		return "", err
	}
	if len(r.roots) == 0 {
		return abs, nil
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("repo_dir: %w", err)
	}
	for _, root := range r.roots {
		rr, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(rr, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return real, nil
		}
	}
	return "", fmt.Errorf("repo_dir %s is not under the server's repo_roots (%s)", repo, strings.Join(r.roots, ", "))
}

// repoOf returns the repository recorded by the session's latest run.
func (r *serveRuns) repoOf(ctx context.Context, sessionID string) (string, error) {
	evs, err := r.store.Read(ctx, sessionID, 1)
	if err != nil {
		return "", err
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == event.RunStarted {
			if dir := event.FieldString(event.Field(evs[i].Payload, "trigger"), "repo_dir"); dir != "" {
				return dir, nil
			}
		}
	}
	return "", fmt.Errorf("session %s records no repository (it was not started through this API): give repo_dir", sessionID)
}

// serveRun is one prepared run.
type serveRun struct {
	r         *serveRuns
	env       *setup.Env
	sessionID string
	start     *agentrun.StartRequest // nil: resume
}

// Execute implements api.Run.
func (s *serveRun) Execute(ctx context.Context) (agentrun.Outcome, error) {
	var out agentrun.Outcome
	// Marked before its lease and Start: from Start's run.started until
	// the Manager registers the run, Manager.Running does not see it. A
	// takeover of the session by this process is waited for.
	end, err := s.r.begin(ctx, s.sessionID)
	if err != nil {
		return out, err
	}
	defer end()
	release, err := s.r.lease(ctx, s.sessionID)
	if err != nil {
		return out, err
	}
	defer release()
	if s.start != nil {
		out, err = s.r.mgr.Start(ctx, s.env.Engine, *s.start)
	} else {
		out, err = s.r.mgr.Resume(ctx, s.env.Engine, s.sessionID, s.env.Workspace.Root(), "")
	}
	if err != nil {
		return out, err
	}
	if _, err := exportSession(ctx, s.r.store, s.r.dataDir, s.sessionID); err != nil {
		return out, fmt.Errorf("export session log: %w", err)
	}
	return out, nil
}

// Close implements api.Run.
func (s *serveRun) Close() error {
	s.env.Close()
	return nil
}

// logLevel parses AGENTOS_LOG_LEVEL (debug, info, warn or error; empty:
// info). At debug the server also logs every accepted webhook delivery.
func logLevel(v string) (slog.Level, error) {
	var l slog.Level
	if v == "" {
		return slog.LevelInfo, nil
	}
	if err := l.UnmarshalText([]byte(v)); err != nil {
		return 0, fmt.Errorf("AGENTOS_LOG_LEVEL=%q: want debug, info, warn or error", v)
	}
	return l, nil
}
