package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
)

// GitBaseURL derives the git host from the REST API URL:
// https://api.github.com → https://github.com; a GitHub Enterprise Server
// https://ghe.example/api/v3 → https://ghe.example.
func GitBaseURL(apiURL string) (string, error) {
	if apiURL == "" {
		return "https://github.com", nil
	}
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("GitHub API URL %q: not a URL", apiURL)
	}
	if u.Host == "api.github.com" {
		return "https://github.com", nil
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v3")
	u.RawQuery, u.Fragment = "", ""
	return strings.TrimSuffix(u.String(), "/"), nil
}

// GitHubBot is the webhook server's GitHub side: the client, the
// session worktrees and the run manager, from which its Dispatcher is
// built once the bot's login is known (Dispatcher).
type GitHubBot struct {
	Client *github.Client
	// Runs is the run manager the bot's dispatcher runs sessions with:
	// the server stops its runs on SIGTERM, before the dispatcher exists.
	Runs *run.Manager

	cfg     config.Config
	log     *slog.Logger
	git     worktrees
	engines Engines
	gitURL  string
	shared  SharedCache

	mu    sync.Mutex
	login string // learned by Login; the commits' author in App mode
}

// NewGitHubBot wires the bot for the server configuration: the GitHub
// client (App or token), worktrees under DataDir/git on the git host that
// serves the API URL, runs over st with engines.
func NewGitHubBot(cfg config.Config, st store.Store, engines Engines, log *slog.Logger) (*GitHubBot, error) {
	return NewGitHubBotOver(cfg, st, engines, log, ClientOptions{})
}

// SharedCache is a key/value cache with expiry that replicas sharing a
// store read and write together (runtime/store/postgres.Cache): what
// every replica would otherwise ask GitHub for once each — a
// collaborator's permission, the App's login — is asked once. Never
// secrets: installation tokens stay in each process.
type SharedCache interface {
	auth.SharedCache
}

// ClientOptions are how the bot's GitHub client reaches GitHub.
type ClientOptions struct {
	// Transport carries the client's HTTP calls (nil:
	// http.DefaultTransport), such as the server's metered transport (API
	// calls by status, rate limit left).
	Transport http.RoundTripper
	// Shared, with replicas on one store, shares permission answers and
	// the App's login between them (nil: each process keeps its own).
	Shared SharedCache
}

// NewGitHubBotOver is NewGitHubBot with the GitHub client built with o.
func NewGitHubBotOver(cfg config.Config, st store.Store, engines Engines, log *slog.Logger, o ClientOptions) (*GitHubBot, error) {
	gcfg := github.Config{BaseURL: cfg.GitHubAPIURL, Transport: o.Transport}
	if o.Shared != nil {
		gcfg.Shared = o.Shared
	}
	switch cfg.GitHubAuth() {
	case config.AuthToken:
		gcfg.Token = cfg.GitHubToken
	case config.AuthApp:
		gcfg.AppID, gcfg.PrivateKey = cfg.GitHubAppID, cfg.GitHubPrivateKey
	default:
		return nil, errors.New("no GitHub credentials")
	}
	if engines == nil {
		return nil, fmt.Errorf("%w: missing Engines", ErrConfig)
	}
	client, err := github.New(gcfg)
	if err != nil {
		return nil, err
	}
	gitURL, err := GitBaseURL(cfg.GitHubAPIURL)
	if err != nil {
		return nil, err
	}
	b := &GitHubBot{Client: client, Runs: run.NewManager(st), cfg: cfg, log: log, engines: engines, gitURL: gitURL, shared: o.Shared}
	// Git uses the same credential as the API: the token, or the
	// repository's installation token (cached until shortly before it
	// expires, shared with the API calls).
	token := func(ctx context.Context, r worktree.Repo) (string, error) {
		return client.GitTokenFor(ctx, r.Owner, r.Name)
	}
	// With an installation token (App mode, and GITHUB_TOKEN in the
	// Action) session branches are published through the Git Data API, so
	// GitHub signs the commits and shows them as Verified; a personal
	// token pushes over git.
	wcfg := worktree.Config{CacheDir: filepath.Join(cfg.DataDir, "git"), BaseURL: gitURL, Token: token, GitData: gitData{Client: client}, ArtifactBranch: cfg.ArtifactBranch, Log: log}
	if cfg.CommitAuthor != "" {
		name, email, err := config.ParseAuthor(cfg.CommitAuthor)
		if err != nil {
			return nil, fmt.Errorf("commit_author: %w", err)
		}
		wcfg.Author = worktree.Identity{Name: name, Email: email}
		// A configured author is an explicit choice: GitHub signs only
		// commits that name none, so these are pushed over git, unsigned.
		wcfg.Publish = worktree.PublishGit
	} else {
		// The bot's own account: the token's user (GET /user, already
		// asked for the login), or the app's <slug>[bot], with GitHub's
		// noreply address so that GitHub links the commits to it. Only
		// the dispatcher commits, and it is built after Login.
		wcfg.AuthorFor = func(ctx context.Context, r worktree.Repo) (worktree.Identity, error) {
			login := b.botLogin()
			if client.IsApp() {
				// An installation's token publishes through the API
				// (worktree.PublishAuto): GitHub makes every published
				// commit the app's, so the local commit's author never
				// leaves the machine and is not worth a GET /users call.
				return worktree.Identity{Name: login, Email: login + "@users.noreply.github.com"}, nil
			}
			id, err := client.CommitIdentity(ctx, r.Owner, r.Name, login)
			return worktree.Identity{Name: id.Name, Email: id.Email}, err
		}
	}
	wm, err := worktree.New(wcfg)
	if err != nil {
		return nil, err
	}
	b.git = worktrees{M: wm, Branch: cfg.ArtifactBranch, OnSessionBranch: cfg.LogOnSessionBranch, Prefix: cfg.BranchPrefix}
	return b, nil
}

func (b *GitHubBot) botLogin() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.login
}

// Login learns the bot's own login (unless configured), retrying while
// GitHub is unreachable: intake goes on meanwhile, deliveries wait in the
// queue. The client caches it: a later call asks GitHub nothing.
func (b *GitHubBot) Login(ctx context.Context) (string, error) {
	cfg, log := b.cfg, b.log
	login := cfg.BotLogin
	for wait := time.Second; login == ""; wait = min(2*wait, time.Minute) {
		var err error
		if login, err = b.Client.BotLogin(ctx); err == nil {
			break
		}
		log.Warn("cannot learn the bot's login from GitHub yet; deliveries wait in the queue", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
	}
	b.mu.Lock()
	b.login = login
	b.mu.Unlock()
	return login, nil
}

// authPolicy is the authorizer's policy for the bot acting as login.
func (b *GitHubBot) authPolicy(login string) auth.Policy {
	p := auth.Policy{AllowedUsers: b.cfg.AllowedUsers, AllowedBots: b.cfg.AllowedBots, BotLogin: login}
	if b.shared != nil {
		p.Shared = b.shared
	}
	return p
}

// BotOptions are the settings of a GitHubBot's dispatcher that come from
// the program rather than the configuration (see Config for each).
type BotOptions struct {
	// ServerURL replaces the web address derived from the API URL (the
	// Action has GITHUB_SERVER_URL).
	ServerURL  string
	Result     func(Result)
	Sandbox    string
	ViewerBase string
	Preflight  func(ctx context.Context) error
	Leases     SessionLeases
	// Workflows replaces the bot's default: review and triage on its own
	// workflow plane, with fix proposals.
	Workflows          *Workflows
	ResumeFromArtifact bool
}

// Dispatcher learns the bot's login (Login: it waits for GitHub) and
// builds the bot's dispatcher with it. The authorizer is built once the
// login is known, since the bot must never authorize itself; the
// permission check runs on each repository's installation in App mode
// (the app's JWT cannot read collaborators), as every repository-scoped
// call of the client does. Each call builds a new dispatcher over the
// same client, worktrees and run manager.
func (b *GitHubBot) Dispatcher(ctx context.Context, o BotOptions) (*Dispatcher, error) {
	login, err := b.Login(ctx)
	if err != nil {
		return nil, err
	}
	cfg := b.cfg
	c := Config{
		Trigger:   cfg.TriggerWord,
		BotLogin:  login,
		GitHub:    b.Client,
		Auth:      auth.New(b.Client, b.authPolicy(login)),
		Git:       b.git,
		Runs:      b.Runs,
		Engines:   b.engines,
		Log:       b.log,
		ServerURL: b.gitURL,
		// Validated with the configuration (worktree.CheckBranchPrefix).
		BranchPrefix:       cfg.BranchPrefix,
		Result:             o.Result,
		Sandbox:            o.Sandbox,
		ViewerBase:         o.ViewerBase,
		Preflight:          o.Preflight,
		Leases:             o.Leases,
		ResumeFromArtifact: o.ResumeFromArtifact,
		// `/agent review` and `/agent triage` run the workflow plane's
		// cycles on the same worktrees, engines and store as every run;
		// a review's safe_auto findings become one fix proposal that
		// waits for approval like any `/agent` request.
		Workflows: &Workflows{OwnPlane: true, ProposeFixes: true},
	}
	if o.ServerURL != "" {
		c.ServerURL = o.ServerURL
	}
	if o.Workflows != nil {
		c.Workflows = o.Workflows
	}
	if b.Client.IsApp() {
		c.Installations = b.Client
	}
	return New(c)
}
