package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/provider"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
)

// gitBaseURL derives the git host from the REST API URL:
// https://api.github.com → https://github.com; a GitHub Enterprise Server
// https://ghe.example/api/v3 → https://ghe.example.
func gitBaseURL(apiURL string) (string, error) {
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

// engines builds run engines on session worktrees over the shared store.
func engines(st store.Store, policyFile string, prof provider.Profile) dispatch.Engines {
	return func(ctx context.Context, r dispatch.EngineRequest) (*agentrun.Engine, func(), error) {
		env, err := setup.Build(ctx, setup.Options{Dir: r.Dir, PolicyFile: policyFile, Profile: prof, Providers: providers(nil), SessionID: r.SessionID, Store: st, UntrustedRepo: r.Untrusted})
		if err != nil {
			return nil, nil, err
		}
		return env.Engine, env.Close, nil
	}
}

// githubBot is the webhook server's GitHub side: the client and a
// dispatcher whose bot login is learned from GitHub.
type githubBot struct {
	client *github.Client
	d      *dispatch.Dispatcher
}

func newGitHubBot(cfg config.Config, st store.Store, prof provider.Profile, log *slog.Logger) (*githubBot, error) {
	gcfg := github.Config{BaseURL: cfg.GitHubAPIURL}
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
	gitURL, err := gitBaseURL(cfg.GitHubAPIURL)
	if err != nil {
		return nil, err
	}
	token := func(ctx context.Context, r worktree.Repo) (string, error) {
		c := client
		if client.IsApp() {
			id, err := client.InstallationID(ctx, r.Owner, r.Name)
			if err != nil {
				return "", err
			}
			if c, err = client.ForInstallation(id); err != nil {
				return "", err
			}
		}
		return c.GitToken(ctx)
	}
	wm, err := worktree.New(worktree.Config{CacheDir: filepath.Join(cfg.DataDir, "git"), BaseURL: gitURL, Token: token, ArtifactBranch: cfg.ArtifactBranch})
	if err != nil {
		return nil, err
	}
	d := &dispatch.Dispatcher{
		Trigger:   cfg.TriggerWord,
		BotLogin:  cfg.BotLogin,
		GitHub:    dispatch.API{Client: client},
		Git:       dispatch.Worktrees{M: wm, Branch: cfg.ArtifactBranch, OnSessionBranch: cfg.LogOnSessionBranch},
		Runs:      agentrun.NewManager(st),
		Engines:   engines(st, cfg.PolicyFile, prof),
		Log:       log,
		ServerURL: gitURL,
	}
	return &githubBot{client: client, d: d}, nil
}

// login learns the bot's own login (unless configured), retrying while
// GitHub is unreachable: intake goes on meanwhile, deliveries wait in the
// queue. The authorizer is built once the login is known, since the bot
// must never authorize itself.
func (b *githubBot) login(ctx context.Context, cfg config.Config, log *slog.Logger) (string, error) {
	login := cfg.BotLogin
	for wait := time.Second; login == ""; wait = min(2*wait, time.Minute) {
		var err error
		if login, err = b.client.BotLogin(ctx); err == nil {
			break
		}
		log.Warn("cannot learn the bot's login from GitHub yet; deliveries wait in the queue", "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
	}
	b.d.BotLogin = login
	b.d.Auth = auth.New(b.client, auth.Policy{AllowedUsers: cfg.AllowedUsers, AllowedBots: cfg.AllowedBots, BotLogin: login})
	return login, nil
}
