package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
)

// *github.Client is the production PermissionSource.
var _ PermissionSource = (*github.Client)(nil)

// perms is a stateful PermissionSource: levels by login, and a call count.
type perms struct {
	levels map[string]string
	err    error
	calls  int
}

func (p *perms) PermissionLevel(_ context.Context, owner, repo, login string) (string, error) {
	p.calls++
	if p.err != nil {
		return "", p.err
	}
	if l, ok := p.levels[strings.ToLower(login)]; ok { // GitHub logins are case-insensitive
		return l, nil
	}
	return "none", nil
}

func TestAuthorize(t *testing.T) {
	levels := map[string]string{
		"alice": "admin", "mona": "maintain", "wes": "write", "tri": "triage", "rita": "read",
		"agentos[bot]": "write", "renovate[bot]": "write", "dependabot[bot]": "write", "evil[bot]": "write",
		"listed-reader": "read",
	}
	tests := []struct {
		name      string
		policy    Policy
		req       Request
		srcErr    error
		want      Reason
		wantCalls int
	}{
		{"admin runs", Policy{}, Request{Login: "alice", UserType: "User", Action: ActionRun}, nil, ReasonAllowed, 1},
		{"maintain approves", Policy{}, Request{Login: "mona", UserType: "User", Action: ActionApprove}, nil, ReasonAllowed, 1},
		{"write denies", Policy{}, Request{Login: "wes", UserType: "User", Action: ActionDeny}, nil, ReasonAllowed, 1},
		{"case-insensitive login", Policy{AllowedUsers: []string{"WES"}}, Request{Login: "Wes", Action: ActionCancel}, nil, ReasonAllowed, 1},
		{"triage refused", Policy{}, Request{Login: "tri", UserType: "User", Action: ActionRun}, nil, ReasonPermission, 1},
		{"read refused", Policy{}, Request{Login: "rita", UserType: "User", Action: ActionApprove}, nil, ReasonPermission, 1},
		{"stranger refused", Policy{}, Request{Login: "nobody", UserType: "User", Action: ActionRun}, nil, ReasonPermission, 1},
		{"allow-list excludes", Policy{AllowedUsers: []string{"alice"}}, Request{Login: "wes", UserType: "User", Action: ActionRun}, nil, ReasonNotListed, 0},
		{"allow-list narrows, never widens", Policy{AllowedUsers: []string{"listed-reader"}}, Request{Login: "listed-reader", UserType: "User", Action: ActionRun}, nil, ReasonPermission, 1},
		{"the bot never approves itself", Policy{BotLogin: "agentos[bot]", AllowedBots: []string{"agentos[bot]"}}, Request{Login: "agentos[bot]", UserType: "Bot", Action: ActionApprove}, nil, ReasonSelf, 0},
		{"the bot by login, any type", Policy{BotLogin: "agentos[bot]"}, Request{Login: "AgentOS[bot]", UserType: "User", Action: ActionRun}, nil, ReasonSelf, 0},
		{"unlisted bot refused", Policy{AllowedBots: []string{"renovate[bot]"}}, Request{Login: "dependabot[bot]", UserType: "Bot", Action: ActionRun}, nil, ReasonBot, 0},
		{"listed bot with write", Policy{AllowedBots: []string{"renovate[bot]"}, AllowedUsers: []string{"alice"}}, Request{Login: "renovate[bot]", UserType: "Bot", Action: ActionRun}, nil, ReasonAllowed, 1},
		{"no suffix matching in the bot list", Policy{AllowedBots: []string{"[bot]", "evil"}}, Request{Login: "evil[bot]", UserType: "Bot", Action: ActionRun}, nil, ReasonBot, 0},
		{"a [bot] suffix on a user is not a bot", Policy{AllowedBots: []string{"renovate[bot]"}}, Request{Login: "dependabot[bot]", UserType: "User", Action: ActionRun}, nil, ReasonAllowed, 1},
		{"organization sender", Policy{}, Request{Login: "acme", UserType: "Organization", Action: ActionRun}, nil, ReasonAccountType, 0},
		{"GitHub error fails closed", Policy{}, Request{Login: "alice", UserType: "User", Action: ActionRun}, errors.New("502 Bad Gateway"), ReasonLookupFailed, 1},
		{"empty login", Policy{}, Request{Login: " ", Action: ActionRun}, nil, ReasonInvalidRequest, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &perms{levels: levels, err: tt.srcErr}
			a := New(src, tt.policy)
			tt.req.Owner, tt.req.Repo = "octo", "app"
			d := a.Authorize(context.Background(), tt.req)
			if d.Reason != tt.want || d.Allowed != (tt.want == ReasonAllowed) {
				t.Errorf("Authorize = %+v, want reason %q", d, tt.want)
			}
			if src.calls != tt.wantCalls {
				t.Errorf("permission lookups = %d, want %d", src.calls, tt.wantCalls)
			}
			if tt.srcErr != nil && !strings.Contains(d.Detail, tt.srcErr.Error()) {
				t.Errorf("Detail = %q, want it to carry the GitHub error", d.Detail)
			}
		})
	}
}

func TestPermissionCache(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	src := &perms{levels: map[string]string{"alice": "write"}}
	a := New(src, Policy{TTL: 30 * time.Second, Now: func() time.Time { return now }})
	ask := func(login, repo string) Decision {
		return a.Authorize(context.Background(), Request{Owner: "octo", Repo: repo, Login: login, UserType: "User", Action: ActionRun})
	}
	steps := []struct {
		name      string
		advance   time.Duration
		change    string // new level for alice before asking
		login     string
		repo      string
		wantOK    bool
		wantCalls int
	}{
		{"first ask", 0, "", "alice", "app", true, 1},
		{"cached", 10 * time.Second, "", "alice", "app", true, 1},
		{"cached even though GitHub changed", 10 * time.Second, "read", "alice", "app", true, 1},
		{"other repo is another key", 0, "", "alice", "other", false, 2},
		{"TTL expired", 11 * time.Second, "", "alice", "app", false, 3},
		{"login key is case-insensitive", time.Second, "", "ALICE", "app", false, 3},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		if s.change != "" {
			src.levels["alice"] = s.change
		}
		d := ask(s.login, s.repo)
		if d.Allowed != s.wantOK || src.calls != s.wantCalls {
			t.Errorf("%s: allowed=%v calls=%d, want %v %d", s.name, d.Allowed, src.calls, s.wantOK, s.wantCalls)
		}
	}
	a.Forget("octo", "app", "alice")
	src.levels["alice"] = "admin"
	if d := ask("alice", "app"); !d.Allowed || src.calls != 4 {
		t.Errorf("after Forget: allowed=%v calls=%d, want true 4", d.Allowed, src.calls)
	}
	// Errors are not cached.
	src.err = errors.New("boom")
	a.Forget("octo", "app", "alice")
	_ = ask("alice", "app")
	src.err = nil
	if d := ask("alice", "app"); !d.Allowed {
		t.Errorf("an error was cached: %+v", d)
	}
}

func TestRefusalMessage(t *testing.T) {
	req := Request{Owner: "octo", Repo: "app", Login: "rita", UserType: "User", Action: ActionApprove}
	tests := []struct {
		reason Reason
		perm   string
		want   []string
	}{
		{ReasonPermission, "read", []string{"@rita", "write access to octo/app", "approve a pending action", "`read`", "Ask a maintainer"}},
		{ReasonNotListed, "", []string{"@rita", "`allowed_users`", "add you"}},
		{ReasonBot, "", []string{"`allowed_bots`"}},
		{ReasonLookupFailed, "", []string{"could not check your permission on octo/app", "try again"}},
		{ReasonAccountType, "", []string{"user accounts"}},
		{ReasonInvalidRequest, "", []string{"could not tell who sent"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.reason), func(t *testing.T) {
			got := RefusalMessage(Decision{Reason: tt.reason, Permission: tt.perm, Request: req, Detail: "GET https://api.github.com/x: 502"})
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("RefusalMessage = %q, want it to contain %q", got, w)
				}
			}
			if strings.Contains(got, "api.github.com") {
				t.Errorf("RefusalMessage leaks the internal detail: %q", got)
			}
		})
	}
	if got := RefusalMessage(Decision{Allowed: true, Reason: ReasonAllowed, Request: req}); got != "" {
		t.Errorf("allowed decision message = %q, want empty", got)
	}
	if got := RefusalMessage(Decision{Reason: ReasonSelf, Request: req}); got != "" {
		t.Errorf("self decision message = %q, want empty (the bot does not answer itself)", got)
	}
}

// TestWithGitHubClient runs the Authorizer on the real client against the
// fake GitHub: permissions come from the collaborator permission API.
func TestWithGitHubClient(t *testing.T) {
	f := fakegithub.New(t)
	f.AddRepo(fakegithub.Repo{Owner: "octo", Name: "app"})
	f.AddToken("tok", "agentos-bot")
	f.SetPermission("octo/app", "mona", fakegithub.PermMaintain)
	f.SetPermission("octo/app", "tri", fakegithub.PermTriage)
	c, err := github.New(github.Config{BaseURL: f.Serve(t), Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	a := New(c, Policy{BotLogin: "agentos-bot"})
	tests := []struct {
		login string
		want  Reason
	}{
		{"mona", ReasonAllowed},
		{"octo", ReasonAllowed}, // owner → admin
		{"tri", ReasonPermission},
		{"ghost-user", ReasonLookupFailed}, // 404 from GitHub: fail closed
	}
	for _, tt := range tests {
		d := a.Authorize(context.Background(), Request{Owner: "octo", Repo: "app", Login: tt.login, UserType: "User", Action: ActionApprove})
		if d.Reason != tt.want {
			t.Errorf("%s: reason = %q (%s), want %q", tt.login, d.Reason, d.Detail, tt.want)
		}
	}
	f.CheckNoViolations(t)
}
