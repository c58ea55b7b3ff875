package action_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/action"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/runtime/demo"
)

// The Action's runner play-through as tests: each job a separate run on
// a fresh machine (a.run: new RUNNER_TEMP, only GitHub and the repository
// carried over), against the strict fake GitHub.

// credentials are the ways the Action authenticates. In every mode the
// bot's login comes from the credentials themselves.
type credentials struct {
	name  string
	login string // what the bot acts as
	setup func(a *actions)
}

func modes(t *testing.T) []credentials {
	t.Helper()
	return []credentials{
		{"GITHUB_TOKEN", "github-actions[bot]", func(a *actions) {}},
		{"App installation token as github_token", "agentos[bot]", func(a *actions) {
			a.fake.AddApp(fakegithub.App{ID: 77, Slug: "agentos"})
			a.fake.AddInstallation(9001, 77, "octo/app")
			a.fake.AddInstallationToken("ghs_agentos_installation", 9001)
			a.inputs["INPUT_GITHUB_TOKEN"] = "ghs_agentos_installation"
			a.gitViaFake = true
		}},
		{"app_id and app_private_key", "agentos[bot]", func(a *actions) {
			app, key, err := fakegithub.NewApp(77, "agentos")
			if err != nil {
				t.Fatal(err)
			}
			a.fake.AddApp(app)
			a.fake.AddInstallation(9001, 77, "octo/app")
			a.inputs["INPUT_GITHUB_TOKEN"], a.inputs["INPUT_APP_ID"], a.inputs["INPUT_APP_PRIVATE_KEY"] = "", "77", string(key)
			a.gitViaFake = true
		}},
	}
}

// botIssues are the issues the bot opened.
func botIssues(a *actions, login string) int {
	n := 0
	for _, is := range a.fake.Issues("octo/app") {
		if is.User == login {
			n++
		}
	}
	return n
}

// Every job, re-run (same GITHUB_RUN_ID, next GITHUB_RUN_ATTEMPT), leaves
// GitHub as the first attempt left it, in every credential mode: the
// re-run recognises its own tracking comment, pull request, approval
// review, home issue and cycle review because it knows its own login.
func TestActionRerunsAreIdempotentInEveryMode(t *testing.T) {
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Run("comment command", func(t *testing.T) {
				a := newActions(t)
				a.inputs = map[string]string{}
				m.setup(a)
				out, _, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
				if err != nil || out.Status != "paused" || out.PRNumber == 0 {
					t.Fatalf("job: %+v %v\n%s", out, err, a.log)
				}
				if !strings.Contains(a.log, "agentos: acting as "+m.login+"\n") {
					t.Errorf("the log does not say the bot acts as %s:\n%s", m.login, a.log)
				}
				before := a.world(a.issue, out.PRNumber)
				a.inputs["GITHUB_RUN_ATTEMPT"] = "2"
				again, _, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
				if err != nil {
					t.Fatalf("re-run: %v\n%s", err, a.log)
				}
				if after := a.world(a.issue, out.PRNumber); after != before || again.SessionID != out.SessionID {
					t.Errorf("re-run changed GitHub: %+v → %+v (session %s → %s)", before, after, out.SessionID, again.SessionID)
				}
				for _, c := range a.fake.Comments("octo/app", a.issue) {
					if c.User != "alice" && c.User != m.login {
						t.Errorf("a comment by %s: the bot acted as someone else", c.User)
					}
				}
				// The maintainer's approval, a later job: completes once.
				done, _, _, err := a.run("pull_request_review", a.reviewEvent(out.PRNumber, "alice", "approved"))
				if err != nil || done.Status != "completed" {
					t.Fatalf("approve: %+v %v\n%s", done, err, a.log)
				}
				before = a.world(a.issue, out.PRNumber)
				a.inputs["GITHUB_RUN_ATTEMPT"] = "3"
				if _, _, _, err := a.run("pull_request_review", a.reviewEvent(out.PRNumber, "alice", "approved")); err != nil {
					t.Fatalf("approve re-run: %v", err)
				}
				if after := a.world(a.issue, out.PRNumber); after != before {
					t.Errorf("approve re-run changed GitHub: %+v → %+v", before, after)
				}
			})
			t.Run("pull request review cycle", func(t *testing.T) {
				a := newActions(t)
				a.inputs = map[string]string{}
				m.setup(a)
				a.reviewer = &gateReviewer{}
				pr, ev := a.openedPR("alice", "octo/app")
				out, _, _, err := a.run("pull_request", ev)
				if err != nil || out.Status != "reviewed" {
					t.Fatalf("job: %+v %v\n%s", out, err, a.log)
				}
				rs := a.fake.Reviews("octo/app", pr)
				if len(rs) != 1 || rs[0].User != m.login {
					t.Fatalf("reviews %+v, want one by %s", rs, m.login)
				}
				a.inputs["GITHUB_RUN_ATTEMPT"] = "2"
				if _, _, _, err := a.run("pull_request", ev); err != nil || len(a.fake.Reviews("octo/app", pr)) != 1 {
					t.Errorf("re-run: %v, %d reviews", err, len(a.fake.Reviews("octo/app", pr)))
				}
			})
			t.Run("scheduled run", func(t *testing.T) {
				a := newActions(t)
				a.inputs = map[string]string{"INPUT_PROMPT": demo.Prompt, "GITHUB_ACTOR": "alice"}
				m.setup(a)
				out, _, _, err := a.run("schedule", scheduleEvent())
				if err != nil || out.Status != "paused" {
					t.Fatalf("job: %+v %v\n%s", out, err, a.log)
				}
				if n := botIssues(a, m.login); n != 1 {
					t.Fatalf("%d home issues by %s", n, m.login)
				}
				before := a.world(0, out.PRNumber)
				a.inputs["GITHUB_RUN_ATTEMPT"] = "2"
				if _, _, _, err := a.run("schedule", scheduleEvent()); err != nil {
					t.Fatalf("re-run: %v\n%s", err, a.log)
				}
				if after := a.world(0, out.PRNumber); after != before || botIssues(a, m.login) != 1 {
					t.Errorf("re-run changed GitHub: %+v → %+v", before, after)
				}
			})
		})
	}
}

// openedPR seeds a same-repository (or, with headRepo, a fork's) pull
// request by author and returns its number and pull_request opened event.
func (a *actions) openedPR(author, headRepo string) (int, map[string]any) {
	a.t.Helper()
	head := strings.Repeat("d", 40)
	fork := ""
	if headRepo != "octo/app" {
		fork = headRepo // the fake serves the head from the fork
	}
	pr := a.fake.AddPullRequest("octo/app", fakegithub.PullRequest{Title: "query", User: author, Head: "query", HeadRepo: fork, HeadSHA: head, Base: "main",
		Files: []fakegithub.PRFile{{Path: "db.go", Patch: "@@ -1 +1,2 @@\n package db\n+var q = \"SELECT \" + name\n"}}})
	ev := firstWith(a.t, "pull_request", "opened", nil)
	retarget(ev, author)
	p := obj(ev, "pull_request")
	p["number"], p["state"], p["draft"] = pr, "open", false
	obj(p, "head")["sha"], obj(p, "head")["ref"] = head, "query"
	obj(obj(p, "head"), "repo")["full_name"] = headRepo
	obj(obj(p, "base"), "repo")["full_name"] = "octo/app"
	return pr, ev
}

// Every automated trigger needs write access by default, as a command
// does; allowed_non_write_users and allowed_bots open the review cycle to
// the accounts they list; pull_request_target and forks are refused.
func TestActionTrustOnEveryTrigger(t *testing.T) {
	cases := []struct {
		name, author, authorType, event, headRepo string
		inputs                                    map[string]string
		want                                      string // status
	}{
		{"maintainer", "alice", "User", "pull_request", "octo/app", nil, "reviewed"},
		{"reader", "rita", "User", "pull_request", "octo/app", nil, "refused"},
		{"stranger", "mallory", "User", "pull_request", "octo/app", nil, "refused"},
		{"reader listed", "rita", "User", "pull_request", "octo/app", map[string]string{"INPUT_ALLOWED_NON_WRITE_USERS": "rita"}, "reviewed"},
		{"anyone", "mallory", "User", "pull_request", "octo/app", map[string]string{"INPUT_ALLOWED_NON_WRITE_USERS": "*"}, "reviewed"},
		{"bot", "renovate[bot]", "Bot", "pull_request", "octo/app", nil, "refused"},
		{"bot listed", "renovate[bot]", "Bot", "pull_request", "octo/app", map[string]string{"INPUT_ALLOWED_BOTS": "renovate[bot]"}, "reviewed"},
		{"other bot listed", "evil[bot]", "Bot", "pull_request", "octo/app", map[string]string{"INPUT_ALLOWED_BOTS": "renovate[bot]"}, "refused"},
		{"maintainer outside allowed_users", "alice", "User", "pull_request", "octo/app", map[string]string{"INPUT_ALLOWED_USERS": "bob"}, "refused"},
		{"pull_request_target", "alice", "User", "pull_request_target", "octo/app", nil, "refused"},
		{"fork", "alice", "User", "pull_request", "alice/app", nil, "refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newActions(t)
			a.inputs = c.inputs
			rv := &gateReviewer{}
			a.reviewer = rv
			pr, ev := a.openedPR(c.author, c.headRepo)
			obj(ev, "sender")["type"] = c.authorType
			out, _, summary, err := a.run(c.event, ev)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, a.log)
			}
			if out.Status != c.want {
				t.Fatalf("status %s, want %s\n%s", out.Status, c.want, a.log)
			}
			if c.want == "refused" {
				if len(rv.inputs) != 0 || len(a.fake.Reviews("octo/app", pr)) != 0 {
					t.Errorf("a refused trigger ran the review: %d inputs, %d reviews", len(rv.inputs), len(a.fake.Reviews("octo/app", pr)))
				}
				if !strings.Contains(a.log, "::warning::agentos: not starting") || !strings.Contains(summary, "## agentos: refused") {
					t.Errorf("the refusal is not said:\n%s\n%s", a.log, summary)
				}
			}
		})
	}
	// A fix run (label trigger) is not opened by allowed_non_write_users.
	t.Run("fix needs write", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_LABEL_TRIGGER": "agent", "INPUT_PROMPT": demo.Prompt, "INPUT_ALLOWED_NON_WRITE_USERS": "*"}
		ev := firstWith(t, "issues", "labeled", nil)
		retarget(ev, "rita")
		is := obj(ev, "issue")
		is["number"], is["state"] = a.issue, "open"
		delete(is, "pull_request")
		obj(ev, "label")["name"] = "agent"
		out, _, _, err := a.run("issues", ev)
		if err != nil || out.Status != "refused" || len(a.fake.PRs("octo/app")) != 0 {
			t.Errorf("a reader's label started a fix: %+v %v", out, err)
		}
	})
}

// With "Allow GitHub Actions to create and approve pull requests" off
// (GitHub's default), the run's pull request is refused: the step fails
// with the setting named, the tracking comment says what happened (no "is
// working on" left behind), the status output is failed; with the setting
// turned on, a re-run of the job opens the pull request from the branch.
func TestActionPullRequestCreationRefused(t *testing.T) {
	a := newActions(t)
	a.fake.SetActionsCanCreatePullRequests("octo/app", false)
	out, outputs, summary, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
	if !errors.Is(err, action.ErrPRsNotPermitted) {
		t.Fatalf("err = %v, want ErrPRsNotPermitted\n%s", err, a.log)
	}
	if out.Status != "failed" || out.ExitReason != action.ExitPRsNotPermitted || !strings.Contains(outputs, "status=failed\n") || !strings.Contains(outputs, "exit_reason=pull_requests_not_permitted\n") {
		t.Errorf("outputs %+v\n%s", out, outputs)
	}
	const setting = "Allow GitHub Actions to create and approve pull requests"
	if !strings.Contains(a.log, "::error::") || !strings.Contains(a.log, setting) || !strings.Contains(summary, setting) {
		t.Errorf("the log or summary does not name the setting:\n%s\n%s", a.log, summary)
	}
	if prs := a.fake.PRs("octo/app"); len(prs) != 0 {
		t.Fatalf("pull requests: %+v", prs)
	}
	cs := a.fake.Comments("octo/app", a.issue)
	var tracking []fakegithub.Comment
	for _, c := range cs {
		if c.User == botLogin {
			tracking = append(tracking, c)
		}
	}
	if len(tracking) != 1 {
		t.Fatalf("bot comments: %+v", tracking)
	}
	body := tracking[0].Body
	if strings.Contains(body, "is working on") || !strings.Contains(body, setting) || !strings.Contains(body, "**failed**") || !strings.Contains(body, "GitHub App") {
		t.Errorf("tracking comment:\n%s", body)
	}
	// The maintainer turns the setting on and re-runs the job.
	a.fake.SetActionsCanCreatePullRequests("octo/app", true)
	a.inputs = map[string]string{"GITHUB_RUN_ATTEMPT": "2"}
	again, _, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
	if err != nil {
		t.Fatalf("re-run: %v\n%s", err, a.log)
	}
	if again.PRNumber == 0 || len(a.fake.PRs("octo/app")) != 1 || again.SessionID != out.SessionID {
		t.Errorf("re-run with the setting on: %+v, %d PRs", again, len(a.fake.PRs("octo/app")))
	}
}

// A denied (here: cancelled) run fails the step with an error annotation
// and an exit reason the command maps to a non-zero exit.
func TestActionDeniedRunFailsTheStep(t *testing.T) {
	a := newActions(t)
	if _, _, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt)); err != nil {
		t.Fatal(err)
	}
	got, outputs, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent cancel"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "cancelled" || got.ExitReason != action.ExitCancelled || !strings.Contains(outputs, "exit_reason=cancelled\n") {
		t.Fatalf("after /agent cancel: %+v\n%s", got, outputs)
	}
	if !strings.Contains(a.log, "::error::agentos session "+got.SessionID+": cancelled") {
		t.Errorf("no error annotation:\n%s", a.log)
	}
}
