package dispatch_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/run"
)

// memWorld is a dispatcher on the in-memory GitHub: enough for what it
// decides before any session exists (who may ask, which route, which
// reply), with no HTTP, git or runtime. Git and Engines panic when
// called and Runs has no store: a trigger that reached them would fail,
// so every case here also proves it never got that far.
type memWorld struct {
	gh      *memGitHub
	inst    *installs
	d       *dispatch.Dispatcher
	results []dispatch.Result
}

func newMemWorld(t *testing.T) *memWorld {
	t.Helper()
	w := &memWorld{gh: newMemGitHub(botLogin), inst: &installs{byRepo: map[string]int64{}}}
	w.gh.issues[1] = github.Issue{Title: "token check accepts prefixes", State: "open"}
	w.gh.prs[2] = github.PullRequest{Number: 2, HeadRef: "feature", HeadSHA: strings.Repeat("a", 40), HeadRepo: repoName, BaseRef: "main", State: "open"}
	d, err := dispatch.New(dispatch.Config{BotLogin: botLogin, GitHub: w.gh, Auth: writers{"alice": true}, Installations: w.inst,
		Git: noGit{}, Runs: run.NewManager(nil), Engines: noEngines,
		Result: func(r dispatch.Result) { w.results = append(w.results, r) }})
	if err != nil {
		t.Fatal(err)
	}
	w.d = d
	return w
}

// noGit is the memWorld's git: nothing here may reach it (its nil
// dispatch.Git panics on any call).
type noGit struct{ dispatch.Git }

// noEngines is the memWorld's engines: nothing here may start a run.
func noEngines(context.Context, dispatch.EngineRequest) (*run.Engine, func(), error) {
	panic("a trigger of the in-memory world reached the run engines")
}

func (w *memWorld) dispatch(t *testing.T, tr webhook.Trigger) dispatch.Result {
	t.Helper()
	if tr.Repo == "" {
		tr.Repo, tr.Owner, tr.Name = repoName, "octo", "app"
	}
	if tr.AuthorType == "" {
		tr.AuthorType = "User"
	}
	n := len(w.results)
	if err := w.d.Dispatch(context.Background(), tr); err != nil {
		t.Fatalf("dispatch %+v: %v", tr, err)
	}
	if len(w.results) != n+1 {
		t.Fatalf("dispatch reported %d results", len(w.results)-n)
	}
	return w.results[n]
}

func comment(number int, isPR bool, author, body string) webhook.Trigger {
	return webhook.Trigger{Kind: webhook.KindComment, Event: "issue_comment", Action: "created", Number: number, IsPR: isPR, Author: author, Body: body, IssueState: "open", DeliveryID: "d-" + author}
}

// What the dispatcher answers before any session exists, on GitHub as it
// is: each case is one trigger, its outcome, and the one comment it posts
// (or none).
func TestRoutingAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trigger webhook.Trigger
		outcome string
		number  int    // where the reply goes
		reply   string // a part of the one reply; "" for none
	}{
		{"help", comment(1, false, "olga", "/agent help"), "help", 1, "/agent approve"},
		{"invalid command", comment(1, false, "alice", "/agent deny"), "replied", 1, "Usage: `/agent deny <id> [reason]`"},
		{"the bot's own comment", comment(1, false, botLogin, "/agent fix it"), "ignored", 1, ""},
		{"no command", comment(1, false, "alice", "thanks, looks good"), "ignored", 1, ""},
		{"a command in hidden text", comment(1, false, "alice", "<!-- /agent fix it -->"), "ignored", 1, ""},
		{"reader asks for a run", comment(1, false, "rita", "/agent fix it"), "refused", 1, "your permission is `read`"},
		{"reader asks for a review", comment(2, true, "rita", "/agent review"), "refused", 2, "Only people with write access"},
		{"review on an issue", comment(1, false, "alice", "/agent review"), "replied", 1, "works on pull requests"},
		{"triage on a pull request", comment(2, true, "alice", "/agent triage"), "replied", 2, "works on issues"},
		{"review without the cycle", comment(2, true, "alice", "/agent review"), "replied", 2, review.ErrNotConfigured.Error()},
		{"a dismissed review", webhook.Trigger{Kind: webhook.KindReview, Event: "pull_request_review", Action: "dismissed", Number: 2, IsPR: true, Author: "alice", ReviewState: "dismissed"}, "ignored", 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newMemWorld(t)
			res := w.dispatch(t, tc.trigger)
			if res.Outcome != tc.outcome {
				t.Errorf("outcome = %q (%s), want %q", res.Outcome, res.Reason, tc.outcome)
			}
			cs := w.gh.comments[tc.number]
			switch {
			case tc.reply == "" && len(cs) != 0:
				t.Errorf("posted %q, want nothing", cs[0].Body)
			case tc.reply != "" && (len(cs) != 1 || !strings.Contains(cs[0].Body, tc.reply) || cs[0].User != botLogin):
				t.Errorf("comments = %+v, want one by the bot containing %q", cs, tc.reply)
			}
			if len(w.gh.reviews[2]) != 0 || len(w.gh.prs) != 1 {
				t.Errorf("a review or a pull request was created")
			}
		})
	}
}

// Installation events keep the app's installations in step; every
// trigger's installation id is remembered for its repository, so that no
// call has to look it up.
func TestRoutingInstallations(t *testing.T) {
	w := newMemWorld(t)
	res := w.dispatch(t, webhook.Trigger{Kind: webhook.KindInstallation, Event: "installation_repositories", Action: "added", InstallationID: 7, Repositories: []string{"octo/app", "octo/lib", "not-a-repo"}, Author: "ada"})
	if res.Outcome != "recorded" || w.inst.byRepo["octo/app"] != 7 || w.inst.byRepo["octo/lib"] != 7 || len(w.inst.byRepo) != 2 {
		t.Fatalf("after added: %+v, %v", res, w.inst.byRepo)
	}
	w.dispatch(t, comment(1, false, "olga", "/agent help"))
	tr := comment(1, false, "olga", "/agent help")
	tr.InstallationID = 8
	w.dispatch(t, tr)
	if w.inst.byRepo["octo/app"] != 8 {
		t.Errorf("a trigger's installation was not remembered: %v", w.inst.byRepo)
	}
	w.dispatch(t, webhook.Trigger{Kind: webhook.KindInstallation, Event: "installation", Action: "deleted", InstallationID: 7, Author: "ada"})
	if _, ok := w.inst.byRepo["octo/lib"]; ok || w.inst.byRepo["octo/app"] != 8 {
		t.Errorf("after deleted: %v, want only octo/app on 8", w.inst.byRepo)
	}
}
