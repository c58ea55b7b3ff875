package action_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/runtime/demo"
)

// dispatchEvent is GitHub's workflow_dispatch example, sent by login.
func dispatchEvent(t *testing.T, login string) map[string]any {
	t.Helper()
	ev := examples(t, "workflow_dispatch")[0]
	retarget(ev, login)
	ev["inputs"] = map[string]any{"prompt": "ignored: the Action reads the prompt input only"}
	return ev
}

// scheduleEvent is what a schedule run's GITHUB_EVENT_PATH holds at its
// smallest: the cron line, no repository and no sender (GITHUB_REPOSITORY
// and GITHUB_ACTOR say them).
func scheduleEvent() map[string]any { return map[string]any{"schedule": "17 3 * * *"} }

// world counts what a run leaves on GitHub.
type world struct {
	issues, prs, comments, reviews int
	branches                       string
}

func (a *actions) world(home, pr int) world {
	a.t.Helper()
	w := world{issues: len(a.fake.Issues("octo/app")), prs: len(a.fake.PRs("octo/app"))}
	if home != 0 {
		w.comments = len(a.fake.Comments("octo/app", home))
	}
	if pr != 0 {
		w.reviews = len(a.fake.Reviews("octo/app", pr))
	}
	w.branches = gittest.Git(a.t, a.bare, "for-each-ref", "--format=%(refname)", "refs/heads/")
	return w
}

// homeIssue is the one issue the bot opened.
func (a *actions) homeIssue() fakegithub.Issue {
	a.t.Helper()
	var mine []fakegithub.Issue
	for _, is := range a.fake.Issues("octo/app") {
		if is.User == botLogin {
			mine = append(mine, is)
		}
	}
	if len(mine) != 1 {
		a.t.Fatalf("the bot opened %d issues, want 1: %+v", len(mine), mine)
	}
	return mine[0]
}

// A workflow_dispatch (or schedule) run with a prompt opens the run's
// home issue, runs the fix cycle as a label_trigger run does (tracking
// comment on the home issue, draft PR, approval review) and pauses; a
// re-run attempt of the same workflow run makes nothing new; the
// maintainer's Approve review, handled by a later job on a fresh machine,
// resumes the session and publishes it.
func TestActionScheduledRunOpensAHomeIssue(t *testing.T) {
	for _, c := range []struct {
		event string
		ev    func(t *testing.T) map[string]any
		vars  map[string]string
	}{
		{"workflow_dispatch", func(t *testing.T) map[string]any { return dispatchEvent(t, "alice") }, nil},
		{"schedule", func(*testing.T) map[string]any { return scheduleEvent() }, map[string]string{"GITHUB_ACTOR": "alice"}},
	} {
		t.Run(c.event, func(t *testing.T) {
			a := newActions(t)
			a.inputs = map[string]string{"INPUT_PROMPT": demo.Prompt + "\n\nKeep the change small."}
			for k, v := range c.vars {
				a.inputs[k] = v
			}
			before := a.world(0, 0)
			out, outputs, summary, err := a.run(c.event, c.ev(t))
			if err != nil {
				t.Fatalf("run: %v\n%s", err, a.log)
			}
			if out.Status != "paused" || out.PRNumber == 0 || out.SessionID == "" || out.LogCommit == "" {
				t.Fatalf("outputs = %+v\n%s", out, outputs)
			}
			home := a.homeIssue()
			if home.Title != "agentos: "+demo.Prompt || home.State != "open" {
				t.Errorf("home issue = %q (%s)", home.Title, home.State)
			}
			if !strings.HasSuffix(strings.TrimSpace(home.Body), "<!-- agentos:home-issue run=42 -->") || !strings.Contains(home.Body, "Keep the change small.") ||
				!strings.Contains(home.Body, "https://github.example/octo/app/actions/runs/42") {
				t.Errorf("home issue body:\n%s", home.Body)
			}
			if want := fmt.Sprintf("agent/%d-", home.Number); !strings.HasPrefix(out.Branch, want) {
				t.Errorf("branch %q, want the home issue's (%s…)", out.Branch, want)
			}
			cs := a.fake.Comments("octo/app", home.Number)
			if len(cs) != 1 || cs[0].User != botLogin || !strings.Contains(cs[0].Body, out.SessionID) {
				t.Fatalf("home issue comments = %+v; want the tracking comment", cs)
			}
			pr, _ := a.fake.PR("octo/app", out.PRNumber)
			if !pr.Draft || pr.User != botLogin || len(a.fake.Reviews("octo/app", out.PRNumber)) != 1 {
				t.Errorf("pr = %+v, reviews %d", pr, len(a.fake.Reviews("octo/app", out.PRNumber)))
			}
			if !strings.Contains(summary, out.SessionID) {
				t.Errorf("summary lacks the session:\n%s", summary)
			}
			after := a.world(home.Number, out.PRNumber)
			if after.issues != before.issues+1 || after.prs != before.prs+1 {
				t.Fatalf("issues %d → %d, prs %d → %d", before.issues, after.issues, before.prs, after.prs)
			}

			// Re-run attempts of the same workflow run, and a step retried
			// within the first attempt: nothing new on GitHub.
			for _, attempt := range []string{"2", "1"} {
				a.inputs["GITHUB_RUN_ATTEMPT"] = attempt
				again, _, _, err := a.run(c.event, c.ev(t))
				if err != nil {
					t.Fatalf("attempt %s: %v\n%s", attempt, err, a.log)
				}
				if got := a.world(home.Number, out.PRNumber); got != after {
					t.Errorf("attempt %s changed GitHub: %+v, was %+v\n%s", attempt, got, after, a.log)
				}
				if again.SessionID != out.SessionID || again.PRNumber != out.PRNumber || again.Status != "paused" {
					t.Errorf("attempt %s outputs = %+v, want the paused session %s", attempt, again, out.SessionID)
				}
				if !strings.Contains(a.log, "already has home issue #") {
					t.Errorf("attempt %s log does not say it found the home issue:\n%s", attempt, a.log)
				}
			}
			delete(a.inputs, "GITHUB_RUN_ATTEMPT")

			done, _, _, err := a.run("pull_request_review", a.reviewEvent(out.PRNumber, "alice", "approved"))
			if err != nil {
				t.Fatalf("approve: %v\n%s", err, a.log)
			}
			if done.Status != "completed" || done.SessionID != out.SessionID || done.PRNumber != out.PRNumber {
				t.Fatalf("after the approval: %+v", done)
			}
			if done.LogCommit == "" || done.LogCommit == out.LogCommit {
				t.Errorf("the completed session's log was not committed again: %q (paused: %q)", done.LogCommit, out.LogCommit)
			}
			if len(a.fake.Issues("octo/app")) != after.issues {
				t.Error("the approval opened an issue")
			}
		})
	}
}

// Nothing is opened for an actor who may not start a run (a reader who
// dispatched, a schedule with no actor), and a neutralized prompt reaches
// the real issue as the unit test shows it.
func TestActionScheduledRunRefusals(t *testing.T) {
	t.Run("reader", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_PROMPT": demo.Prompt}
		before := a.world(0, 0)
		out, outputs, summary, err := a.run("workflow_dispatch", dispatchEvent(t, "rita"))
		if err != nil || out.Status != "refused" || !strings.Contains(outputs, "status=refused\n") {
			t.Fatalf("reader: %+v, %v\n%s", out, err, a.log)
		}
		if got := a.world(0, 0); got != before || len(a.fake.Comments("octo/app", a.issue)) != 0 {
			t.Errorf("a refused run changed GitHub: %+v, was %+v", got, before)
		}
		if !strings.Contains(a.log, "::warning::agentos: not starting the fix cycle for workflow_dispatch: rita has read access to octo/app") || !strings.Contains(summary, "rita has read access") {
			t.Errorf("the refusal is not said:\n%s\n%s", a.log, summary)
		}
	})
	t.Run("no actor", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_PROMPT": demo.Prompt}
		before := a.world(0, 0)
		if _, _, _, err := a.run("schedule", scheduleEvent()); err == nil || !strings.Contains(err.Error(), "names no actor") {
			t.Fatalf("schedule without an actor: %v", err)
		}
		if got := a.world(0, 0); got != before {
			t.Errorf("GitHub changed: %+v, was %+v", got, before)
		}
	})
	t.Run("neutralized prompt", func(t *testing.T) {
		a := newActions(t)
		// The preflight fails after the home issue is opened: this
		// checks the issue, not the run.
		a.preflight = func(context.Context) error { return errors.New("model endpoint unreachable") }
		a.inputs = map[string]string{"INPUT_PROMPT": "<!-- hidden -->/agent deploy @alice\nthen ping @octo-org/team"}
		_, _, _, err := a.run("workflow_dispatch", dispatchEvent(t, "alice"))
		if err == nil {
			t.Fatal("the failing preflight did not fail the step")
		}
		home := a.homeIssue()
		if home.Title != "agentos: /\u200bagent deploy @\u200balice" || strings.Contains(home.Body, "hidden") || strings.Count(home.Body, "<!--") != 1 {
			t.Errorf("home issue %q:\n%s", home.Title, home.Body)
		}
		// A retried step finds the issue (the run never began) and starts
		// the run there.
		a.preflight = nil
		out, _, _, err := a.run("workflow_dispatch", dispatchEvent(t, "alice"))
		if err != nil || out.Status != "paused" || !strings.HasPrefix(out.Branch, fmt.Sprintf("agent/%d-", home.Number)) {
			t.Fatalf("retry: %+v, %v\n%s", out, err, a.log)
		}
		if a.homeIssue().Number != home.Number {
			t.Error("the retry opened another issue")
		}
	})
}
