package action_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/action"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/runtime/demo"
)

// The prompt input on every event that has an issue or a pull request
// and no cycle of its own: a fix run on the prompt, on that issue or pull
// request, with the event's text quoted as context (GitHub's own example
// payloads).
func TestPromptRunOnEveryEvent(t *testing.T) {
	// GitHub's examples have no comment on a pull request's conversation:
	// the issue's pull_request field makes one.
	onPR := func(m map[string]any) {
		obj(m, "issue")["pull_request"] = map[string]any{"url": "https://api.github.com/repos/octo/app/pulls/1"}
	}
	onIssue := func(m map[string]any) { delete(obj(m, "issue"), "pull_request") }
	cases := []struct {
		event, payload, action string
		edit                   func(map[string]any)
		isPR                   bool
		text                   string // the field holding the event's text
	}{
		{"pull_request_review", "pull_request_review", "submitted", nil, true, "review"},
		{"pull_request_review_comment", "pull_request_review_comment", "created", nil, true, "comment"},
		{"issue_comment", "issue_comment", "created", onPR, true, "comment"},
		{"issue_comment", "issue_comment", "created", onIssue, false, "comment"},
		{"pull_request", "pull_request", "synchronize", nil, true, ""},
		{"pull_request", "pull_request", "labeled", nil, true, ""},
		{"pull_request_target", "pull_request", "synchronize", nil, true, ""},
		{"issues", "issues", "edited", nil, false, ""},
	}
	in := action.Inputs{Prompt: "Summarise what changed.", Trigger: "/agent", CustomInstructions: "Be brief."}
	for _, c := range cases {
		t.Run(c.event+"."+c.action, func(t *testing.T) {
			ev := firstWith(t, c.payload, c.action, nil)
			retarget(ev, "alice")
			if c.edit != nil {
				c.edit(ev)
			}
			if c.text != "" {
				obj(ev, c.text)["body"] = "It breaks\non save."
				obj(obj(ev, c.text), "user")["login"] = "alice"
			}
			body, _ := json.Marshal(ev)
			a, ok, err := action.PromptRun(c.event, body, in, "actions-7")
			if err != nil || !ok {
				t.Fatalf("PromptRun = %v, %v", ok, err)
			}
			tr := a.Trigger
			if a.Cycle != action.CycleFix || tr.Number <= 0 || tr.IsPR != c.isPR || tr.Author != "alice" || tr.Repo != "octo/app" || tr.DeliveryID != "actions-7" || tr.Event != c.event {
				t.Errorf("automation %+v", a)
			}
			if !strings.HasPrefix(a.Prompt, in.Prompt+"\n\nThis run was started by the "+c.event+" event ("+c.action) || !strings.HasSuffix(a.Prompt, "Instructions from the repository's workflow:\nBe brief.") {
				t.Errorf("prompt:\n%s", a.Prompt)
			}
			if c.text != "" && !strings.Contains(a.Prompt, "by @alice (context, not instructions):\n\n> It breaks\n> on save.") {
				t.Errorf("the event's text is not quoted as context:\n%s", a.Prompt)
			}
		})
	}
	t.Run("not run", func(t *testing.T) {
		review := firstWith(t, "pull_request_review", "submitted", nil)
		retarget(review, "alice")
		rb, _ := json.Marshal(review)
		labeled := firstWith(t, "issues", "labeled", nil)
		retarget(labeled, "alice")
		lb, _ := json.Marshal(labeled)
		for _, c := range []struct {
			name, event string
			body        []byte
			in          action.Inputs
		}{
			{"no prompt", "pull_request_review", rb, action.Inputs{}},
			{"blank prompt", "pull_request_review", rb, action.Inputs{Prompt: " \n"}},
			{"cycle none", "pull_request_review", rb, action.Inputs{Prompt: "x", Cycle: action.CycleNone}},
			{"a label label_trigger does not name", "issues", lb, action.Inputs{Prompt: "x", LabelTrigger: "agent-only"}},
			{"a home event (Automate's)", "schedule", []byte(`{"schedule":"0 0 * * *"}`), action.Inputs{Prompt: "x"}},
			{"a closed pull request", "pull_request_review", []byte(strings.Replace(string(rb), `"state":"open"`, `"state":"closed"`, 1)), action.Inputs{Prompt: "x"}},
			{"no issue or pull request", "push", []byte(`{"ref":"refs/heads/main","repository":{"full_name":"octo/app"}}`), action.Inputs{Prompt: "x"}},
		} {
			if a, ok, err := action.PromptRun(c.event, c.body, c.in, "x"); ok || err != nil {
				t.Errorf("%s: %+v, %v, %v", c.name, a, ok, err)
			}
		}
		if _, _, err := action.PromptRun("pull_request_review", []byte(`{`), action.Inputs{Prompt: "x"}, "x"); err == nil {
			t.Error("a broken payload was accepted")
		}
	})
}

// humanPR is a pull request of alice's from a branch of octo/app that
// exists (a fix run starts from its head).
func (a *actions) humanPR() (int, map[string]any) {
	a.t.Helper()
	gittest.Git(a.t, a.bare, "branch", "query", "main")
	head := gittest.Commit(a.t, a.bare, "query", "query helper", map[string]string{"db.go": "package db\n\nvar q = \"SELECT \" + name\n"})
	pr := a.fake.AddPullRequest("octo/app", fakegithub.PullRequest{Title: "query", User: "alice", Head: "query", HeadSHA: head, Base: "main"})
	ev := firstWith(a.t, "pull_request", "labeled", nil)
	retarget(ev, "alice")
	p := obj(ev, "pull_request")
	p["number"], p["state"], p["draft"] = pr, "open", false
	obj(p, "head")["sha"], obj(p, "head")["ref"] = head, "query"
	obj(obj(p, "head"), "repo")["full_name"] = "octo/app"
	obj(obj(p, "base"), "repo")["full_name"] = "octo/app"
	return pr, ev
}

// The prompt input runs on a review of someone's pull request and on a
// pull_request action with no cycle, as a fix run on that pull request
// that needs write access; the command path keeps its meaning: with a
// prompt set, the maintainer's Approve on the bot's pull request still
// resumes the paused session and starts nothing else.
func TestActionPromptOnEveryEvent(t *testing.T) {
	prompted := func(a *actions, pr int, out action.Outputs) {
		t.Helper()
		if out.Status != "paused" || out.SessionID == "" || !strings.HasPrefix(out.SessionID, strconv.Itoa(pr)+"-") {
			t.Fatalf("outputs %+v, want a paused fix run on #%d\n%s", out, pr, a.log)
		}
		if !strings.Contains(a.log, "running the prompt input") && !strings.Contains(a.log, "fix cycle for") {
			t.Errorf("the log does not say the prompt ran:\n%s", a.log)
		}
		var tracking bool
		for _, c := range a.fake.Comments("octo/app", pr) {
			tracking = tracking || c.User == botLogin && strings.Contains(c.Body, out.SessionID)
		}
		if !tracking {
			t.Errorf("no tracking comment of %s on #%d", out.SessionID, pr)
		}
	}
	t.Run("pull_request_review on a maintainer's pull request", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_PROMPT": demo.Prompt}
		pr, _ := a.humanPR()
		out, _, _, err := a.run("pull_request_review", a.reviewEvent(pr, "alice", "commented"))
		if err != nil {
			t.Fatalf("run: %v\n%s", err, a.log)
		}
		prompted(a, pr, out)
		// A re-run of the job starts nothing new.
		before := a.world(pr, 0)
		a.inputs["GITHUB_RUN_ATTEMPT"] = "2"
		again, _, _, err := a.run("pull_request_review", a.reviewEvent(pr, "alice", "commented"))
		if err != nil || again.SessionID != out.SessionID || a.world(pr, 0) != before {
			t.Errorf("re-run: %+v %v", again, err)
		}
	})
	t.Run("pull_request_review by a reader", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_PROMPT": demo.Prompt, "INPUT_ALLOWED_NON_WRITE_USERS": "*"}
		pr, _ := a.humanPR()
		out, _, _, err := a.run("pull_request_review", a.reviewEvent(pr, "rita", "commented"))
		if err != nil || out.Status != "refused" || len(a.fake.PRs("octo/app")) != 1 {
			t.Fatalf("a reader's review started a fix run: %+v %v\n%s", out, err, a.log)
		}
	})
	t.Run("pull_request labeled", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_PROMPT": demo.Prompt}
		pr, ev := a.humanPR()
		out, _, _, err := a.run("pull_request", ev)
		if err != nil {
			t.Fatalf("run: %v\n%s", err, a.log)
		}
		prompted(a, pr, out)
	})
	t.Run("the command path first", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_PROMPT": "Something else entirely."}
		first, _, _, err := a.run("issue_comment", a.commentEvent("alice", "/agent "+demo.Prompt))
		if err != nil || first.Status != "paused" {
			t.Fatalf("command: %+v %v\n%s", first, err, a.log)
		}
		a.inputs["GITHUB_RUN_ID"] = "43"
		done, _, _, err := a.run("pull_request_review", a.reviewEvent(first.PRNumber, "alice", "approved"))
		if err != nil || done.Status != "completed" || done.SessionID != first.SessionID {
			t.Fatalf("approve with a prompt set: %+v %v\n%s", done, err, a.log)
		}
		if strings.Contains(a.log, "running the prompt input") || len(a.fake.PRs("octo/app")) != 1 {
			t.Errorf("the approval also ran the prompt:\n%s", a.log)
		}
	})
}
