package action_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/schemas"
)

// gateReviewer plays the review cycle's personas with one planted finding
// and gates it with the shipped confidence-gating policy.
type gateReviewer struct{ inputs []review.Input }

func (g *gateReviewer) Review(ctx context.Context, in review.Input) (review.Output, error) {
	g.inputs = append(g.inputs, in)
	reg, err := workflow.Load(schemas.MustDefault(), workflow.Builtin())
	if err != nil {
		return review.Output{}, err
	}
	pol, err := reg.Policy("confidence-gating")
	if err != nil {
		return review.Output{}, err
	}
	f := workflow.Finding{ID: "f1", Reviewer: "security", Severity: "P0", Confidence: 100, Rule: "sql-injection", Title: "Query built from input", Path: "db.go", Line: 2}
	return review.Output{Findings: []workflow.Finding{f}, Verdict: "done",
		Decisions: []review.FindingDecision{{FindingID: f.ID, Gate: pol.Decide(workflow.Activation{Finding: f, Mode: in.Mode})}}}, nil
}

type allowTriager struct{ inputs []review.TriageInput }

func (a *allowTriager) Triage(ctx context.Context, in review.TriageInput) (review.TriageOutput, error) {
	a.inputs = append(a.inputs, in)
	ok := workflow.Outcome{PolicyID: "mode-dispatch", Decision: workflow.Allow}
	return review.TriageOutput{Labels: []string{"bug"}, Summary: "Saving crashes.", LabelDecision: ok, SummaryDecision: ok, Verdict: "done"}, nil
}

// pull_request opened runs the review cycle headless: one review with
// the finding on its line, and the cycle's verdict as an output.
func TestActionReviewsAnOpenedPullRequest(t *testing.T) {
	a := newActions(t)
	rv := &gateReviewer{}
	a.reviewer = rv
	head := strings.Repeat("d", 40)
	// The author needs write access, as for a command (trust.go).
	a.fake.SetPermission("octo/app", "dev", fakegithub.PermWrite)
	pr := a.fake.AddPullRequest("octo/app", fakegithub.PullRequest{Title: "query", User: "dev", Head: "query", HeadSHA: head, Base: "main",
		Files: []fakegithub.PRFile{{Path: "db.go", Patch: "@@ -1 +1,2 @@\n package db\n+var q = \"SELECT \" + name\n"}}})
	ev := firstWith(t, "pull_request", "opened", nil)
	retarget(ev, "dev")
	p := obj(ev, "pull_request")
	p["number"], p["state"], p["draft"] = pr, "open", false
	obj(p, "head")["sha"], obj(p, "head")["ref"] = head, "query"
	obj(obj(p, "head"), "repo")["full_name"] = "octo/app"
	obj(obj(p, "base"), "repo")["full_name"] = "octo/app"
	out, outputs, _, err := a.run("pull_request", ev)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, a.log)
	}
	if len(rv.inputs) != 1 || rv.inputs[0].Mode != review.ModeHeadless || rv.inputs[0].PR != pr {
		t.Fatalf("review cycle inputs = %+v", rv.inputs)
	}
	reviews := a.fake.Reviews("octo/app", pr)
	cs := a.fake.ReviewComments("octo/app", pr)
	if len(reviews) != 1 || reviews[0].User != botLogin || len(cs) != 1 || cs[0].Path != "db.go" || cs[0].Line != 2 || cs[0].Side != "RIGHT" {
		t.Fatalf("reviews = %+v, comments = %+v", reviews, cs)
	}
	if out.Status != "reviewed" || out.Verdict != "done" || !strings.Contains(outputs, "status=reviewed\n") || !strings.Contains(outputs, "verdict=done\n") {
		t.Errorf("outputs = %+v\n%s", out, outputs)
	}
	// The workflow re-run (same run id) posts nothing more.
	if _, _, _, err := a.run("pull_request", ev); err != nil || len(a.fake.Reviews("octo/app", pr)) != 1 {
		t.Errorf("re-run: %v, %d reviews", err, len(a.fake.Reviews("octo/app", pr)))
	}
}

// In App mode the run mints its own installation token, acts as the app
// (issues opened → triage), and revokes the token when it ends.
func TestActionAppModeRevokesItsToken(t *testing.T) {
	a := newActions(t)
	app, key, err := fakegithub.NewApp(77, "agentos")
	if err != nil {
		t.Fatal(err)
	}
	a.fake.AddApp(app)
	a.fake.AddInstallation(9001, 77, "octo/app")
	a.fake.AddLabel("octo/app", fakegithub.Label{Name: "bug"})
	tr := &allowTriager{}
	a.triager = tr
	// rita reads only: allowed_non_write_users opens triage to her.
	a.inputs = map[string]string{"INPUT_GITHUB_TOKEN": "", "INPUT_APP_ID": "77", "INPUT_APP_PRIVATE_KEY": string(key), "INPUT_ALLOWED_NON_WRITE_USERS": "rita"}
	ev := firstWith(t, "issues", "opened", nil)
	retarget(ev, "rita")
	is := obj(ev, "issue")
	is["number"], is["state"] = a.issue, "open"
	delete(is, "pull_request")
	a.fake.ResetCalls()
	out, _, _, err := a.run("issues", ev)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, a.log)
	}
	if len(tr.inputs) != 1 || tr.inputs[0].Mode != review.ModeHeadless {
		t.Fatalf("triage inputs = %+v", tr.inputs)
	}
	got, _ := a.fake.Issue("octo/app", a.issue)
	c := a.fake.Comments("octo/app", a.issue)
	if strings.Join(got.Labels, ",") != "bug" || len(c) != 1 || c[0].User != "agentos[bot]" || !strings.Contains(c[0].Body, "Saving crashes.") {
		t.Errorf("labels %v, comments %+v", got.Labels, c)
	}
	calls := a.fake.Calls()
	if calls["POST /app/installations/{installation_id}/access_tokens"] != 1 || calls["DELETE /installation/token"] != 1 {
		t.Errorf("calls = %v; want one token minted and revoked", calls)
	}
	if out.Verdict != "done" || !strings.Contains(a.log, "revoked 1 installation token") {
		t.Errorf("outputs %+v, log:\n%s", out, a.log)
	}
	// The key appears only in the mask commands (which hide it): whole,
	// and line by line.
	for _, l := range strings.Split(a.log, "\n") {
		if strings.Contains(l, "BEGIN RSA") && !strings.HasPrefix(l, "::add-mask::") {
			t.Errorf("the private key reached the log: %.60s", l)
		}
	}
	keyLines := strings.Split(strings.TrimSpace(string(key)), "\n")
	if !strings.Contains(a.log, "::add-mask::"+keyLines[1]+"\n") {
		t.Error("the key's lines are not masked one by one")
	}
}

// An issue labelled with label_trigger starts a fix run on the prompt
// input, authorized like `/agent <prompt>`: the labeller needs write
// access.
func TestActionLabelTriggerStartsARun(t *testing.T) {
	labelled := func(a *actions, login string) map[string]any {
		ev := firstWith(t, "issues", "labeled", nil)
		retarget(ev, login)
		is := obj(ev, "issue")
		is["number"], is["state"] = a.issue, "open"
		delete(is, "pull_request")
		obj(ev, "label")["name"] = "agent"
		return ev
	}
	t.Run("maintainer", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_LABEL_TRIGGER": "agent", "INPUT_PROMPT": demo.Prompt}
		out, _, _, err := a.run("issues", labelled(a, "alice"))
		if err != nil {
			t.Fatalf("run: %v\n%s", err, a.log)
		}
		if out.Status != "paused" || out.PRNumber == 0 || out.LogCommit == "" {
			t.Errorf("outputs = %+v", out)
		}
	})
	t.Run("reader", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_LABEL_TRIGGER": "agent", "INPUT_PROMPT": demo.Prompt}
		out, _, _, err := a.run("issues", labelled(a, "rita"))
		if err != nil || out.Status != "refused" || len(a.fake.PRs("octo/app")) != 0 {
			t.Errorf("reader: %+v, %v", out, err)
		}
	})
	t.Run("other label", func(t *testing.T) {
		a := newActions(t)
		a.inputs = map[string]string{"INPUT_LABEL_TRIGGER": "ship-it"}
		out, _, _, err := a.run("issues", labelled(a, "alice"))
		if err != nil || out.Status != "ignored" {
			t.Errorf("other label: %+v, %v", out, err)
		}
	})
}
