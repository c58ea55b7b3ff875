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

// GitHubBot is the webhook server's GitHub side: the client and a
// dispatcher whose bot login is learned from GitHub (Login).
type GitHubBot struct {
	Client     *github.Client
	Dispatcher *Dispatcher
	cfg        config.Config
	log        *slog.Logger
}

// NewGitHubBot wires a dispatcher for the server configuration: the GitHub
// client (App or token), worktrees under DataDir/git on the git host that
// serves the API URL, runs over st with engines.
func NewGitHubBot(cfg config.Config, st store.Store, engines Engines, log *slog.Logger) (*GitHubBot, error) {
	return NewGitHubBotOver(cfg, st, engines, log, nil)
}

// NewGitHubBotOver is NewGitHubBot with the GitHub client's HTTP calls
// going through transport (nil: http.DefaultTransport), such as the
// server's metered transport (API calls by status, rate limit left).
func NewGitHubBotOver(cfg config.Config, st store.Store, engines Engines, log *slog.Logger, transport http.RoundTripper) (*GitHubBot, error) {
	gcfg := github.Config{BaseURL: cfg.GitHubAPIURL, Transport: transport}
	switch cfg.GitHubAuth() {
	case config.AuthToken:
		gcfg.Token = cfg.GitHubToken
	case config.AuthApp:
		gcfg.AppID, gcfg.PrivateKey = cfg.GitHubAppID, cfg.GitHubPrivateKey
	default:
		return nil, errors.New("no GitHub credentials")
	}
	client, err := github.New(gcfg)
	if err != nil {
		return nil, err
	}
	gitURL, err := GitBaseURL(cfg.GitHubAPIURL)
	if err != nil {
		return nil, err
	}
	// Git uses the same credential as the API: the token, or the
	// repository's installation token (cached until shortly before it
	// expires, shared with the API calls).
	token := func(ctx context.Context, r worktree.Repo) (string, error) {
		return client.GitTokenFor(ctx, r.Owner, r.Name)
	}
	d := &Dispatcher{}
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
		// noreply address so that GitHub links the commits to it.
		wcfg.AuthorFor = func(ctx context.Context, r worktree.Repo) (worktree.Identity, error) {
			if client.IsApp() {
				// An installation's token publishes through the API
				// (worktree.PublishAuto): GitHub makes every published
				// commit the app's, so the local commit's author never
				// leaves the machine and is not worth a GET /users call.
				return worktree.Identity{Name: d.BotLogin, Email: d.BotLogin + "@users.noreply.github.com"}, nil
			}
			id, err := client.CommitIdentity(ctx, r.Owner, r.Name, d.BotLogin)
			return worktree.Identity{Name: id.Name, Email: id.Email}, err
		}
	}
	wm, err := worktree.New(wcfg)
	if err != nil {
		return nil, err
	}
	*d = Dispatcher{
		Trigger:   cfg.TriggerWord,
		BotLogin:  cfg.BotLogin,
		GitHub:    client,
		Git:       worktrees{M: wm, Branch: cfg.ArtifactBranch, OnSessionBranch: cfg.LogOnSessionBranch, Prefix: cfg.BranchPrefix},
		Runs:      run.NewManager(st),
		Engines:   engines,
		Log:       log,
		ServerURL: gitURL,
		// Validated with the configuration (worktree.CheckBranchPrefix).
		BranchPrefix: cfg.BranchPrefix,
	}
	if client.IsApp() {
		d.Installations = client
	}
	// `/agent review` and `/agent triage` run the workflow plane's cycles
	// on the same worktrees, engines and store as every run.
	plane := &workflowPlane{D: d}
	// A review's safe_auto findings become one fix proposal that waits
	// for approval like any `/agent` request.
	d.Workflows = &Workflows{Reviewer: plane, Triager: plane, ProposeFixes: true}
	return &GitHubBot{Client: client, Dispatcher: d, cfg: cfg, log: log}, nil
}

// Login learns the bot's own login (unless configured), retrying while
// GitHub is unreachable: intake goes on meanwhile, deliveries wait in the
// queue. The authorizer is built once the login is known, since the bot
// must never authorize itself. Until Login returns the dispatcher must not
// be used.
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
	b.Dispatcher.BotLogin = login
	// The permission check runs on each repository's installation in App
	// mode (the app's JWT cannot read collaborators), as every
	// repository-scoped call of the client does.
	b.Dispatcher.Auth = auth.New(b.Client, auth.Policy{AllowedUsers: cfg.AllowedUsers, AllowedBots: cfg.AllowedBots, BotLogin: login})
	return login, nil
}
