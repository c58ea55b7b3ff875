package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
)

func TestGitBaseURL(t *testing.T) {
	tests := []struct{ api, want string }{
		{"", "https://github.com"},
		{"https://api.github.com/", "https://github.com"},
		{"https://api.github.com", "https://github.com"},
		{"https://ghe.example.com/api/v3", "https://ghe.example.com"},
		{"https://ghe.example.com/api/v3/", "https://ghe.example.com"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080"},
	}
	for _, tt := range tests {
		got, err := GitBaseURL(tt.api)
		if err != nil || got != tt.want {
			t.Errorf("GitBaseURL(%q) = %q, %v; want %q", tt.api, got, err, tt.want)
		}
	}
	if _, err := GitBaseURL("::not a url"); err == nil {
		t.Error("a malformed URL was accepted")
	}
}

// The server's wiring: a token-mode bot learns its login from GitHub,
// reaches git on the host that serves the API, and handles a comment end
// to end (one server plays github.com: the REST API and git over HTTPS).
func TestGitHubBotFromServerConfig(t *testing.T) {
	fake := fakegithub.New(t)
	gitHost, gitHandler := gittest.NewHandler(t)
	mux := http.NewServeMux()
	mux.Handle("/octo/", gitHandler)
	mux.Handle("/", fake)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	gitHost.URL = srv.URL
	sample := t.TempDir()
	if err := demo.WriteSample(sample); err != nil {
		t.Fatal(err)
	}
	bare := gitHost.Bare(t, "octo", "app", gittest.WriteTree(t, sample))
	fake.AddRepo(fakegithub.Repo{Owner: "octo", Name: "app"})
	fake.BackWithGit("octo/app", bare)
	// In token mode the same token serves the API and git.
	fake.AddToken(gittest.Token, "agentos-bot[bot]")
	fake.SetPermission("octo/app", "agentos-bot[bot]", fakegithub.PermWrite)
	fake.SetPermission("octo/app", "alice", fakegithub.PermWrite)
	issue := fake.AddIssue("octo/app", fakegithub.Issue{Title: "token check", User: "alice"})
	defer fake.CheckNoViolations(t)

	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.TempDir(), sealer, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	script, err := demo.Script()
	if err != nil {
		t.Fatal(err)
	}
	prof := provider.DefaultProfile()
	prof.Provider, prof.Script = "scripted", "embedded"
	reg := provider.Registry{"scripted": func(context.Context, provider.Profile) (provider.Provider, error) { return scripted.New(script), nil }}
	engines := func(ctx context.Context, r EngineRequest) (*run.Engine, func(), error) {
		e, err := setup.Build(ctx, setup.Options{Dir: r.Dir, Runs: r.Runs, RequireWorkflows: true, UntrustedRepo: r.Untrusted, Profile: prof, Providers: reg, SessionID: r.SessionID, Store: st})
		if err != nil {
			return nil, nil, err
		}
		return e.Engine, e.Close, nil
	}
	cfg := config.Default()
	cfg.DataDir, cfg.GitHubToken, cfg.GitHubAPIURL = t.TempDir(), gittest.Token, srv.URL+"/"
	bot, err := NewGitHubBot(cfg, st, engines, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	d, err := bot.Dispatcher(context.Background(), BotOptions{Result: func(r Result) { res = r }})
	if err != nil {
		t.Fatal(err)
	}
	if d.BotLogin() != "agentos-bot[bot]" {
		t.Fatalf("login = %q", d.BotLogin())
	}
	fake.AddComment("octo/app", issue, "alice", "/agent "+demo.Prompt)
	err = d.Dispatch(context.Background(), webhook.Trigger{Kind: webhook.KindComment, Repo: "octo/app", Owner: "octo", Name: "app", Number: issue, Author: "alice", AuthorType: "User", Body: "/agent " + demo.Prompt, IssueState: "open", DeliveryID: "d-1"})
	if err != nil || res.Status != "paused" || res.PR == 0 {
		t.Fatalf("dispatch: %+v, %v", res, err)
	}
	gittest.Git(t, bare, "rev-parse", "--verify", res.Branch)
	gittest.Git(t, bare, "rev-parse", "--verify", "agent-sessions")
}

type installationLog struct{ calls []string }

func (l *installationLog) RememberInstallation(owner, repo string, id int64) {
	l.calls = append(l.calls, fmt.Sprintf("remember %s/%s %d", owner, repo, id))
}

func (l *installationLog) ForgetInstallation(id int64) {
	l.calls = append(l.calls, fmt.Sprintf("forget %d", id))
}

// The dispatcher tells Installations what the payloads say: the
// installation of every trigger's repository, and installation events.
func TestInstallationsFollowThePayloads(t *testing.T) {
	tests := []struct {
		name string
		t    webhook.Trigger
		want string
	}{
		{"comment with installation", webhook.Trigger{Kind: webhook.KindComment, Repo: "octo/app", InstallationID: 7, Body: "hello"}, "remember octo/app 7"},
		{"comment without installation", webhook.Trigger{Kind: webhook.KindComment, Repo: "octo/app", Body: "hello"}, ""},
		{"installation created", webhook.Trigger{Kind: webhook.KindInstallation, Action: "created", InstallationID: 8, Repositories: []string{"a/b", "c/d"}}, "remember a/b 8; remember c/d 8"},
		{"repositories added", webhook.Trigger{Kind: webhook.KindInstallation, Action: "added", InstallationID: 8, Repositories: []string{"a/b"}}, "remember a/b 8"},
		{"repositories removed", webhook.Trigger{Kind: webhook.KindInstallation, Action: "removed", InstallationID: 8, Repositories: []string{"a/b"}}, "forget 8"},
		{"installation deleted", webhook.Trigger{Kind: webhook.KindInstallation, Action: "deleted", InstallationID: 8}, "forget 8"},
		{"installation suspended", webhook.Trigger{Kind: webhook.KindInstallation, Action: "suspend", InstallationID: 8}, "forget 8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := &installationLog{}
			d := newTestDispatcher(t, Config{Installations: log, Log: slog.New(slog.DiscardHandler)})
			if err := d.Dispatch(context.Background(), tt.t); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(log.calls, "; "); got != tt.want {
				t.Errorf("Installations got %q, want %q", got, tt.want)
			}
		})
	}
}
