package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"unicode"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/command"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/internal/corpus"
	"github.com/agentos/agentos/bot/webhook"
)

func TestRouteTable(t *testing.T) {
	cases := []struct {
		name    string
		t       webhook.Trigger
		cmd     command.Name
		handler string // "" : no route
		need    auth.Action
		refusal dispatch.Refusal
	}{
		{"issue comment /agent <prompt>", webhook.Trigger{Event: "issue_comment", Action: "created", Kind: webhook.KindComment}, command.Run, "commands.startRun", auth.ActionRun, dispatch.Reply},
		{"issue comment /agent status", webhook.Trigger{Event: "issue_comment", Action: "created", Kind: webhook.KindComment}, command.Status, "commands.status", auth.ActionStatus, dispatch.Reply},
		{"issue comment /agent cancel", webhook.Trigger{Event: "issue_comment", Action: "created", Kind: webhook.KindComment}, command.Cancel, "commands.cancel", auth.ActionCancel, dispatch.Reply},
		{"issue comment /agent help", webhook.Trigger{Event: "issue_comment", Action: "created", Kind: webhook.KindComment}, command.HelpCmd, "commands.help", "", dispatch.Reply},
		{"issue comment /agent review", webhook.Trigger{Event: "issue_comment", Action: "created", Kind: webhook.KindComment}, command.Review, "../review/review.Review", auth.ActionRun, dispatch.Reply},
		{"issue comment /agent triage", webhook.Trigger{Event: "issue_comment", Action: "created", Kind: webhook.KindComment}, command.Triage, "../review/triage.Triage", auth.ActionRun, dispatch.Reply},
		{"line comment /agent approve", webhook.Trigger{Event: "pull_request_review_comment", Action: "created", Kind: webhook.KindReviewComment}, command.Approve, "approvals.answer", auth.ActionApprove, dispatch.Reply},
		{"commented review /agent deny", webhook.Trigger{Event: "pull_request_review", Action: "submitted", Kind: webhook.KindReview, ReviewState: "commented"}, command.Deny, "approvals.answer", auth.ActionDeny, dispatch.Reply},
		{"approve review", webhook.Trigger{Event: "pull_request_review", Action: "submitted", Kind: webhook.KindReview, ReviewState: "approved"}, "", "approvals.onApproveReview", auth.ActionApprove, dispatch.Record},
		{"request-changes review", webhook.Trigger{Event: "pull_request_review", Action: "submitted", Kind: webhook.KindReview, ReviewState: "changes_requested"}, "", "approvals.onChangesRequested", auth.ActionDeny, dispatch.Record},
		{"pull request closed", webhook.Trigger{Event: "pull_request", Action: "closed", Kind: webhook.KindPRClosed}, "", "pullrequests.onPRClosed", "", dispatch.Reply},
		{"pull request synchronize", webhook.Trigger{Event: "pull_request", Action: "synchronize", Kind: webhook.KindPRSynchronize}, "", "pullrequests.onPRSynchronize", "", dispatch.Reply},
		{"installation created", webhook.Trigger{Event: "installation", Action: "created", Kind: webhook.KindInstallation}, "", "installations.installationChanged", "", dispatch.Reply},
		{"repositories removed", webhook.Trigger{Event: "installation_repositories", Action: "removed", Kind: webhook.KindInstallation}, "", "installations.installationChanged", "", dispatch.Reply},
		// Triggers built in code carry no event: their kind routes them.
		{"kind-only approve review", webhook.Trigger{Kind: webhook.KindReview, ReviewState: "approved"}, "", "approvals.onApproveReview", auth.ActionApprove, dispatch.Record},
		{"kind-only comment /agent status", webhook.Trigger{Kind: webhook.KindComment}, command.Status, "commands.status", auth.ActionStatus, dispatch.Reply},
		// Unrouted.
		{"dismissed review", webhook.Trigger{Event: "pull_request_review", Action: "dismissed", Kind: webhook.KindReview, ReviewState: "dismissed"}, "", "", "", 0},
		{"approve review with a command word", webhook.Trigger{Event: "pull_request_review", Action: "submitted", Kind: webhook.KindReview, ReviewState: "approved"}, command.Run, "", "", 0},
		{"edited comment", webhook.Trigger{Event: "issue_comment", Action: "edited", Kind: webhook.KindComment}, command.Run, "", "", 0},
		{"pull request opened", webhook.Trigger{Event: "pull_request", Action: "opened", Kind: "pr_opened"}, "", "", "", 0},
		{"closed event under another kind", webhook.Trigger{Event: "pull_request", Action: "closed", Kind: webhook.KindPRSynchronize}, "", "", "", 0},
		{"unknown command word", webhook.Trigger{Kind: webhook.KindComment}, "deploy", "", "", 0},
		{"no kind", webhook.Trigger{}, "", "", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok, reason := dispatch.Lookup(tc.t, tc.cmd)
			if tc.handler == "" {
				if ok {
					t.Fatalf("routed to %s, want no route", r.Handler)
				}
				if !strings.HasPrefix(reason, "no route for ") {
					t.Errorf("reason %q", reason)
				}
				return
			}
			if !ok {
				t.Fatalf("no route (%s), want %s", reason, tc.handler)
			}
			if r.Handler != tc.handler || r.Need != tc.need || r.Refusal != tc.refusal {
				t.Errorf("got %s need %q refusal %d, want %s need %q refusal %d", r.Handler, r.Need, r.Refusal, tc.handler, tc.need, tc.refusal)
			}
		})
	}
}

// TestRouteTableIsWhole: every command has exactly one route, every route
// names a handler that exists in the file it names, and every source of
// the table is one webhook.Normalize produces from its event and action.
func TestRouteTableIsWhole(t *testing.T) {
	perCommand := map[command.Name]int{}
	for _, r := range dispatch.Routes() {
		if r.Command != "" {
			perCommand[r.Command]++
		}
		i := strings.LastIndex(r.Handler, ".")
		file, fn, ok := r.Handler[:max(i, 0)], r.Handler[i+1:], i > 0
		if !ok {
			t.Errorf("handler %q is not file.function", r.Handler)
			continue
		}
		src, err := os.ReadFile(file + ".go")
		if err != nil {
			t.Errorf("route %s: %v", r.Handler, err)
			continue
		}
		if !strings.Contains(string(src), "func (d *Dispatcher) "+fn+"(") && !strings.Contains(string(src), "func (h *Handler) "+fn+"(") {
			t.Errorf("route %s: %s.go has no Dispatcher.%s or review Handler.%s", r.Handler, file, fn, fn)
		}
		if len(r.On) == 0 {
			t.Errorf("route %s has no source", r.Handler)
		}
	}
	described := map[command.Name]bool{}
	for _, d := range command.Descriptions() {
		described[d.Name] = true
		if perCommand[d.Name] != 1 {
			t.Errorf("command %s has %d routes, want 1", d.Name, perCommand[d.Name])
		}
	}
	// The table's own words (bare words bot/command does not describe)
	// too: one route each, a word the parser can give back (lower-case,
	// no space), described in the entry and only there.
	for _, r := range dispatch.Routes() {
		if r.Command == "" {
			continue
		}
		if n := perCommand[r.Command]; n != 1 {
			t.Errorf("command %s has %d routes, want 1", r.Command, n)
		}
		if w := string(r.Command); w != strings.ToLower(w) || strings.IndexFunc(w, unicode.IsSpace) >= 0 {
			t.Errorf("route %s: command %q is not a lower-case word", r.Handler, w)
		}
		if described[r.Command] && (r.Summary != "" || len(r.Examples) > 0) {
			t.Errorf("route %s: command %s is described by bot/command and by its entry", r.Handler, r.Command)
		}
		if !described[r.Command] && (r.Summary == "" || len(r.Examples) == 0) {
			t.Errorf("route %s: command %s has no summary or example for the help", r.Handler, r.Command)
		}
	}
}

// corpusTriggers normalises every example payload of GitHub's
// webhooks-examples (the npm corpus) for the events the bot subscribes to.
func corpusTriggers(t *testing.T) (triggers []webhook.Trigger, intakeIgnored int) {
	t.Helper()
	raw, err := os.ReadFile(corpus.WebhookExamples(t))
	if err != nil {
		t.Fatal(err)
	}
	var index []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	for _, ev := range index {
		for i, body := range ev.Examples {
			tr, ok, err := webhook.Normalize(ev.Name, fmt.Sprintf("corpus-%s-%d", ev.Name, i), body)
			switch {
			case err != nil:
				// The intake refuses it with this error; dispatch never sees it.
				intakeIgnored++
			case !ok:
				intakeIgnored++
			default:
				triggers = append(triggers, tr)
			}
		}
	}
	return triggers, intakeIgnored
}

// TestRouteTableTakesTheWebhookCorpus dispatches every example payload
// the intake accepts: each is routed or ignored with a reason, none
// panics or fails.
func TestRouteTableTakesTheWebhookCorpus(t *testing.T) {
	triggers, intakeIgnored := corpusTriggers(t)
	if len(triggers) < 10 {
		t.Fatalf("only %d corpus payloads reach dispatch", len(triggers))
	}
	w := newWorld(t)
	routed := map[string]int{}
	for i, tr := range triggers {
		name := fmt.Sprintf("#%d %s.%s", i, tr.Event, tr.Action)
		if tr.Repo != "" {
			// The examples name GitHub's sample repositories; ours is
			// octo/app.
			tr.Repo, tr.Owner, tr.Name = repoName, "octo", "app"
		}
		var cmd command.Name
		if strings.Contains(tr.Body, "/agent") {
			t.Fatalf("%s: an example holds a command; the test would start a run", name)
		}
		r, ok, _ := dispatch.Lookup(tr, cmd)
		if ok {
			routed[r.Handler]++
		}
		n := len(w.results)
		if err := w.d.Dispatch(context.Background(), tr); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(w.results) != n+1 {
			t.Fatalf("%s: %d results", name, len(w.results)-n)
		}
		res := w.results[n]
		if res.Outcome == "" || res.Outcome == "ignored" && res.Reason == "" {
			t.Errorf("%s: %+v, want an outcome, and a reason when ignored", name, res)
		}
		if !ok && (res.Outcome != "ignored" || !strings.HasPrefix(res.Reason, "no route for ")) && !isCommentKind(tr.Kind) {
			t.Errorf("%s: unrouted, but %+v", name, res)
		}
	}
	for _, h := range []string{"pullrequests.onPRClosed", "pullrequests.onPRSynchronize", "installations.installationChanged"} {
		if routed[h] == 0 {
			t.Errorf("no corpus payload reached %s (routed: %v)", h, routed)
		}
	}
	t.Logf("%d payloads dispatched (%v routed by event), %d ignored by the intake", len(triggers), routed, intakeIgnored)
}

func isCommentKind(k string) bool {
	return k == webhook.KindComment || k == webhook.KindReviewComment || k == webhook.KindReview
}

// TestUnroutedTriggerIsIgnoredWithAReason: a trigger no route takes is
// reported ignored with the reason, logged at INFO, and writes nothing to
// GitHub.
func TestUnroutedTriggerIsIgnoredWithAReason(t *testing.T) {
	w := newWorld(t)
	logs := w.logTo()
	before := len(w.fake.Comments(repoName, w.issue))
	cases := []struct {
		t      webhook.Trigger
		reason string
	}{
		{webhook.Trigger{Event: "pull_request_review", Action: "dismissed", Kind: webhook.KindReview, ReviewState: "dismissed", Number: 9, IsPR: true, Author: "alice"},
			"no route for pull_request_review dismissed (review dismissed)"},
		{webhook.Trigger{Event: "pull_request", Action: "reopened", Kind: webhook.KindPRClosed, Number: 9, IsPR: true, Author: "alice"},
			"no route for pull_request reopened"},
		{webhook.Trigger{Event: "issue_comment", Action: "created", Kind: webhook.KindComment, Number: w.issue, Author: "alice", Body: "/agent deploy now"},
			""}, // a free-text request: routed to startRun, not unrouted (checked below)
		{webhook.Trigger{Kind: "label", Number: w.issue, Author: "alice"},
			"no route for trigger kind label"},
	}
	for _, tc := range cases {
		if tc.reason == "" {
			if r, ok, _ := dispatch.Lookup(tc.t, command.Run); !ok || r.Handler != "commands.startRun" {
				t.Errorf("free text: %+v %v", r, ok)
			}
			continue
		}
		got := w.dispatch(tc.t)
		if got.Outcome != "ignored" || got.Reason != tc.reason {
			t.Errorf("%s.%s: %+v, want ignored: %s", tc.t.Event, tc.t.Action, got, tc.reason)
		}
		if line := lineWith(t, logs.String(), "trigger ignored"); !strings.Contains(line, "no route for") {
			t.Errorf("log line %q", line)
		}
	}
	if got := strings.Count(logs.String(), `msg="trigger ignored"`); got != 3 {
		t.Errorf("%d \"trigger ignored\" lines, want 3:\n%s", got, logs)
	}
	if after := len(w.fake.Comments(repoName, w.issue)); after != before {
		t.Errorf("unrouted triggers wrote %d comments", after-before)
	}
}

// TestHelpSaysWhoMayUseEachCommand: `/agent help` lists every command
// with who may use it, as the route table enforces it; a reader asking
// for help gets it, and is refused `/agent status` with the help's
// words.
func TestHelpSaysWhoMayUseEachCommand(t *testing.T) {
	for _, trigger := range []string{"", "/bot"} {
		want := trigger
		if want == "" {
			want = command.DefaultTrigger
		}
		help := dispatch.HelpText(trigger)
		rows := map[command.Name]string{}
		for _, d := range command.Descriptions() {
			usage := "`" + strings.ReplaceAll(d.Usage(trigger), "|", `\|`) + "`"
			for _, line := range strings.Split(help, "\n") {
				if strings.HasPrefix(line, "| "+usage+" |") {
					rows[d.Name] = line
				}
			}
			if rows[d.Name] == "" {
				t.Fatalf("help for %q lacks a row for %s:\n%s", trigger, usage, help)
			}
			for _, e := range d.Examples {
				if ex := strings.ReplaceAll(e, "{trigger}", want); !strings.Contains(help, ex+"\n") {
					t.Errorf("help lacks example %q", ex)
				}
			}
		}
		for _, line := range strings.Split(help, "\n") {
			if strings.HasPrefix(line, "| ") {
				if n := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|"); n != 4 {
					t.Errorf("table row with %d separators: %s", n, line)
				}
			}
		}
		writers := "users with write, maintain or admin permission"
		for _, n := range []command.Name{command.Run, command.Approve, command.Deny, command.Review, command.Triage, command.Status, command.Cancel} {
			if !strings.HasSuffix(rows[n], "| "+writers+" on the repository (within the bot's `allowed_users`/`allowed_bots` lists when set) |") {
				t.Errorf("%s row does not say write access: %s", n, rows[n])
			}
		}
		if !strings.HasSuffix(rows[command.HelpCmd], "| anyone who can comment |") {
			t.Errorf("help row: %s", rows[command.HelpCmd])
		}
		for _, review := range []string{"| Approve |", "| Request changes |"} {
			if !strings.Contains(help, review) || !strings.Contains(help[strings.Index(help, review):], writers) {
				t.Errorf("help lacks the %s review with who may use it", review)
			}
		}
		if strings.Contains(help, "{trigger}") {
			t.Error("unexpanded placeholder")
		}
	}

	// What the help says is what the bot does: a reader (read permission)
	// gets the help, and is refused status like every write command.
	w := newWorld(t)
	if got := w.comment(w.issue, false, "rita", "/agent help"); got.Outcome != "help" {
		t.Fatalf("help: %+v", got)
	}
	if c := lastComment(w.fake.Comments(repoName, w.issue), botLogin); c.Body != dispatch.HelpText("") {
		t.Errorf("the help comment is not HelpText:\n%s", c.Body)
	}
	got := w.comment(w.issue, false, "rita", "/agent status")
	if got.Outcome != "refused" || got.Reason != string(auth.ReasonPermission) {
		t.Fatalf("reader's status: %+v", got)
	}
	if c := lastComment(w.fake.Comments(repoName, w.issue), botLogin); !strings.Contains(c.Body, "show the run's status") || !strings.Contains(c.Body, "write access") {
		t.Errorf("refusal: %s", c.Body)
	}
	if got := w.comment(w.issue, false, "alice", "/agent status"); got.Outcome != "status" {
		t.Errorf("maintainer's status: %+v", got)
	}
}

// TestEventsFromTheRouteTable: the events the webhook handler accepts and
// the actions the Processor acts on are the route table's sources, and
// nothing else.
func TestEventsFromTheRouteTable(t *testing.T) {
	ev := dispatch.Events()
	for _, c := range []struct {
		event, action string
		want          bool
	}{
		{"issue_comment", "created", true},
		{"issue_comment", "edited", false},
		{"pull_request_review", "submitted", true},
		{"pull_request_review", "dismissed", false},
		{"pull_request_review_comment", "created", true},
		{"pull_request", "closed", true},
		{"pull_request", "synchronize", true},
		{"pull_request", "opened", false},
		{"installation", "created", true},
		{"installation_repositories", "added", true},
		{"push", "", false},
		{"workflow_run", "completed", false},
	} {
		if got := ev.Accepts(c.event, c.action); got != c.want {
			t.Errorf("%s.%s accepted %v, want %v", c.event, c.action, got, c.want)
		}
	}
	n := 0
	for _, r := range dispatch.Routes() {
		for _, s := range r.On {
			n++
			for _, a := range append(s.Actions, "") {
				if (a != "" || len(s.Actions) == 0) && !ev.Accepts(s.Event, a) {
					t.Errorf("route %s: source %s.%s not accepted", r.Handler, s.Event, a)
				}
			}
		}
	}
	if n == 0 || len(ev) != 6 {
		t.Errorf("%d sources, %d events: %v", n, len(ev), ev)
	}
}
