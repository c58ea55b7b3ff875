package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/command"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/bot/worker"
	"github.com/gin-gonic/gin"
)

// dismissedReview is GitHub's pull_request_review webhook for a review
// that alice dismissed: an event and action the bot's route table does
// not take, which webhook.Normalize already turns into a Trigger.
const dismissedReview = `{
  "action": "dismissed",
  "review": {"id": 8101, "state": "dismissed", "body": "", "user": {"login": "rita", "type": "User"}},
  "pull_request": {"number": 12, "state": "open", "node_id": "PR_12",
    "head": {"sha": "1111111111111111111111111111111111111111", "ref": "feature", "repo": {"full_name": "octo/app"}},
    "base": {"ref": "main", "repo": {"full_name": "octo/app"}}},
  "repository": {"full_name": "octo/app", "name": "app", "owner": {"login": "octo"}, "default_branch": "main"},
  "installation": {"id": 42},
  "sender": {"login": "alice", "type": "User"}
}`

// askedAuthorizer allows everyone and keeps what it was asked.
type askedAuthorizer struct {
	mu    sync.Mutex
	asked []auth.Request
}

func (a *askedAuthorizer) Authorize(_ context.Context, r auth.Request) auth.Decision {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, r)
	return auth.Decision{Allowed: true, Request: r}
}

func (a *askedAuthorizer) requests() []auth.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]auth.Request(nil), a.asked...)
}

// TestNewTriggerIsOneRouteTableEntry: a trigger the bot does not handle
// today — a dismissed review — is handled once the route table has one
// entry for it, and nothing else changes: the same signed delivery goes
// through the whole server path (intake → queue → worker → dispatcher)
// with the intake's events, the worker's actions and the dispatcher's
// routes all taken from the one table. Without the entry the worker
// ignores it; with it the entry's handler gets the trigger, after the
// author was authorized for the entry's Need. The help and the other
// events stay as they were; a command entry is listed in the help with
// who may use it.
func TestNewTriggerIsOneRouteTableEntry(t *testing.T) {
	var (
		mu   sync.Mutex
		took []webhook.Trigger
	)
	entry := route{
		On:      []source{{Event: "pull_request_review", Actions: []string{"dismissed"}, Kind: webhook.KindReview, State: "dismissed"}},
		Need:    auth.ActionRun,
		Handler: "newtrigger_test.onDismissed",
		handle: func(_ *Dispatcher, _ context.Context, repo github.Repo, tr webhook.Trigger, _ command.Cmd) (Result, error) {
			mu.Lock()
			defer mu.Unlock()
			took = append(took, tr)
			return Result{Outcome: "recorded", Reason: "a dismissed review on " + repo.FullName()}, nil
		},
	}
	edited := append(routes(), entry)

	// The table's derived views: only the new action is added.
	before, after := routes().events(), edited.events()
	if before.Accepts("pull_request_review", "dismissed") {
		t.Fatal("the bot's table takes a dismissed review already: pick another trigger for this test")
	}
	if !after.Accepts("pull_request_review", "dismissed") || !after.Accepts("pull_request_review", "submitted") {
		t.Errorf("events with the entry: %v", after)
	}
	after["pull_request_review"] = before["pull_request_review"]
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the entry changed other events: %v, was %v", after, before)
	}
	if edited.help("") != routes().help("") {
		t.Error("an event entry changed the help")
	}

	for _, tc := range []struct {
		name    string
		table   routeTable
		outcome string // the delivery's outcome in the queue
		took    int    // triggers the entry's handler got
	}{
		{"the bot's table", routes(), queue.OutcomeIgnored, 0},
		{"with the entry", edited, queue.OutcomeProcessed, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			took = nil
			mu.Unlock()
			authz := &askedAuthorizer{}
			rec := serverPath(t, tc.table, Config{Auth: authz}, "pull_request_review", []byte(dismissedReview))
			if rec.Outcome != tc.outcome {
				t.Fatalf("delivery %s: outcome %q (%s), want %q", rec.ID, rec.Outcome, rec.Error, tc.outcome)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(took) != tc.took {
				t.Fatalf("the entry's handler got %d triggers, want %d", len(took), tc.took)
			}
			asked := authz.requests()
			if tc.took == 0 {
				if len(asked) != 0 {
					t.Errorf("an unrouted trigger was authorized: %+v", asked)
				}
				return
			}
			tr := took[0]
			if tr.Kind != webhook.KindReview || tr.ReviewState != "dismissed" || tr.Author != "alice" || tr.Repo != "octo/app" || tr.Number != 12 || tr.DeliveryID != rec.ID {
				t.Errorf("the handler got %+v", tr)
			}
			want := []auth.Request{{Owner: "octo", Repo: "app", Login: "alice", UserType: "User", Action: auth.ActionRun}}
			if !reflect.DeepEqual(asked, want) {
				t.Errorf("authorized %+v, want %+v", asked, want)
			}
		})
	}

	// A command entry: routed from every comment source and listed in the
	// help with who may use it. (That the parser takes the word from the
	// table, and the help its description: TestNewCommandWordIsOneRouteTableEntry.)
	cmd := route{On: commentSources, Command: "deploy", Need: auth.ActionRun, Handler: "newtrigger_test.deploy"}
	withCmd := append(routes(), cmd)
	for _, s := range commentSources {
		tr := webhook.Trigger{Event: s.Event, Action: s.Actions[0], Kind: s.Kind, ReviewState: s.State}
		if r, ok, reason := withCmd.lookup(tr, "deploy"); !ok || r.Handler != cmd.Handler {
			t.Errorf("%s: deploy routed to %q (%s)", s.Event, r.Handler, reason)
		}
		if _, ok, _ := routes().lookup(tr, "deploy"); ok {
			t.Errorf("%s: the bot's table routes deploy", s.Event)
		}
	}
	help := withCmd.help("")
	if !strings.Contains(help, "| `/agent deploy` |  | "+cmd.who()+" |") || strings.Contains(routes().help(""), "deploy") {
		t.Errorf("the help with a deploy entry:\n%s", help)
	}
	if !reflect.DeepEqual(withCmd.events(), routes().events()) {
		t.Errorf("a command on the comment sources changed the events: %v", withCmd.events())
	}
}

// serverPath sends body as a signed delivery of event through the
// server's path — the webhook handler, a log queue, a worker and a
// dispatcher built by New from c — with every one of them taking the
// events or routes of table, and returns the delivery's record once the
// worker is done with it.
func serverPath(t *testing.T, table routeTable, c Config, event string, body []byte) queue.Record {
	t.Helper()
	secret := []byte("newtrigger-secret")
	q, err := queue.OpenLogQueue(filepath.Join(t.TempDir(), "q"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	gin.SetMode(gin.TestMode)
	e := gin.New()
	e.POST("/webhook", webhook.NewHandler(webhook.Config{Secrets: [][]byte{secret}, Events: table.events()}, q, nil).Serve)
	const id = "newtrigger-1"
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.EventHeader, event)
	req.Header.Set(webhook.DeliveryHeader, id)
	req.Header.Set(webhook.SignatureHeader, webhook.Sign(secret, body))
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	if w.Code != http.StatusAccepted {
		t.Fatalf("intake answered %d: %s", w.Code, w.Body)
	}

	d := newTestDispatcher(t, c)
	d.routes = table
	ctx, stop := context.WithCancel(context.Background())
	p := &worker.Processor{Queue: q, Dispatch: d, BotLogin: d.botLogin, Events: table.events(), Workers: 1, PollInterval: 10 * time.Millisecond}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx) }()
	defer func() {
		stop()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	// Waiting, not timing: the deadline only bounds a worker that never
	// finishes.
	for deadline := time.Now().Add(30 * time.Second); ; {
		rec, ok, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok && rec.State == "done" {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %s not done: %+v", id, rec)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEveryRoutedCommandIsParsed: each command word of the route table is
// one the dispatcher's parser gives back, and has its description for the
// help (bot/command's, or the entry's own for a bare word bot/command does
// not know): a route the parser never gives back, or one without a
// summary, fails here instead of never being reached. It holds for the
// bot's table and for the table with one new bare word.
func TestEveryRoutedCommandIsParsed(t *testing.T) {
	descs := map[command.Name]bool{}
	for _, d := range command.Descriptions() {
		descs[d.Name] = d.Summary != ""
	}
	deploy := route{On: commentSources, Command: "deploy", Need: auth.ActionRun, Handler: "newtrigger_test.deploy", Summary: "Deploy to staging."}
	for _, tc := range []struct {
		name  string
		table routeTable
	}{{"the bot's table", routes()}, {"with a deploy entry", append(routes(), deploy)}} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDispatcher(t, Config{})
			d.routes = tc.table
			n := 0
			for _, r := range tc.table {
				if r.Command == "" {
					continue
				}
				n++
				p := d.parse(command.DefaultTrigger + " " + string(r.Command))
				got := p.Name
				if p.Kind == command.Command {
					got = p.Command.Name
				}
				if got != r.Command || (p.Kind != command.Command && p.Kind != command.Help && p.Kind != command.Invalid) {
					t.Errorf("route %s: `%s %s` parses as %v %q, not as its command", r.Handler, command.DefaultTrigger, r.Command, p.Kind, got)
				}
				if !descs[r.Command] && r.Summary == "" {
					t.Errorf("route %s: command %s has no description for the help", r.Handler, r.Command)
				}
			}
			if n < 8 {
				t.Errorf("the route table has %d commands", n)
			}
		})
	}
	// The check is not blind: a word the table does not route is a
	// request in free text, for the dispatcher's parser as for
	// bot/command's default one.
	d := newTestDispatcher(t, Config{})
	for name, p := range map[string]command.Result{
		"the dispatcher's": d.parse(command.DefaultTrigger + " deploy"),
		"the default":      command.Parse(command.DefaultTrigger+" deploy", ""),
	} {
		if p.Kind != command.Command || p.Command.Name != command.Run {
			t.Errorf("`%s deploy` parses with %s parser as %+v", command.DefaultTrigger, name, p)
		}
	}
}

// issueComment is GitHub's issue_comment webhook for alice's comment body
// on issue 7 of octo/app.
func issueComment(t *testing.T, body string) []byte {
	t.Helper()
	user := map[string]any{"login": "alice", "type": "User"}
	b, err := json.Marshal(map[string]any{
		"action":       "created",
		"issue":        map[string]any{"number": 7, "state": "open", "title": "staging"},
		"comment":      map[string]any{"id": 77, "body": body, "user": user, "author_association": "MEMBER"},
		"repository":   map[string]any{"full_name": "octo/app", "name": "app", "owner": map[string]any{"login": "octo"}, "default_branch": "main"},
		"installation": map[string]any{"id": 42},
		"sender":       user,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postedComments is a GitHub that takes comments and keeps them; any
// other call panics (unreachable).
type postedComments struct {
	unreachable
	mu     sync.Mutex
	bodies []string
}

func (p *postedComments) CreateComment(_ context.Context, _ github.Repo, _ int, body string) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bodies = append(p.bodies, body)
	return int64(len(p.bodies)), nil
}

func (p *postedComments) posted() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.bodies)
}

// TestNewCommandWordIsOneRouteTableEntry: a bare `/agent deploy`, a word
// neither the bot's table nor bot/command knows, is a request in free
// text until a test-only table has one entry for it; with the entry, and
// no other edit, the same signed comment goes through the whole server
// path to the entry's handler (after the author was authorized for the
// entry's Need), `/agent help` lists it with its summary, example and who
// may use it, and the withdrawal of queued requests no longer takes it
// for a request. "deploy" with more words stays a request, and a quoted
// or code-span `/agent deploy` is ignored, as for every command.
func TestNewCommandWordIsOneRouteTableEntry(t *testing.T) {
	const word command.Name = "deploy"
	var (
		mu   sync.Mutex
		took []string
	)
	record := func(what string) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		took = append(took, what)
		return Result{Outcome: "recorded"}, nil
	}
	// The bot's table, except that its free-text route records the
	// request instead of starting a run.
	without := routes()
	runs := 0
	for i := range without {
		switch without[i].Command {
		case command.Run:
			runs++
			without[i].handle = func(_ *Dispatcher, _ context.Context, _ github.Repo, _ webhook.Trigger, c command.Cmd) (Result, error) {
				return record("run: " + c.Prompt)
			}
		case word:
			t.Fatalf("the bot's table routes %s already: pick another word for this test", word)
		}
	}
	if runs != 1 {
		t.Fatalf("the bot's table has %d free-text routes", runs)
	}
	entry := route{On: commentSources, Command: word, Need: auth.ActionRun, Handler: "newtrigger_test.deploy",
		Summary:  "Deploy this pull request's head to the staging site.",
		Examples: []string{"{trigger} deploy"},
		handle: func(_ *Dispatcher, _ context.Context, repo github.Repo, tr webhook.Trigger, c command.Cmd) (Result, error) {
			return record(fmt.Sprintf("%s by %s on %s#%d", c.Name, tr.Author, repo.FullName(), tr.Number))
		}}
	with := append(slices.Clone(without), entry)

	if !reflect.DeepEqual(with.events(), without.events()) {
		t.Errorf("a command entry changed the events: %v, was %v", with.events(), without.events())
	}

	writer := []auth.Request{{Owner: "octo", Repo: "app", Login: "alice", UserType: "User", Action: auth.ActionRun}}
	for _, tc := range []struct {
		name    string
		table   routeTable
		trigger string // the dispatcher's command word
		body    string
		took    []string
		outcome string // the dispatcher's Result
		asked   []auth.Request
		help    bool // a help comment is posted
	}{
		{"without the entry", without, "", "/agent deploy", []string{"run: deploy"}, "recorded", writer, false},
		{"with the entry", with, "", "/agent deploy", []string{"deploy by alice on octo/app#7"}, "recorded", writer, false},
		{"with the entry, upper-case after prose", with, "", "Ready.\n/agent DEPLOY", []string{"deploy by alice on octo/app#7"}, "recorded", writer, false},
		{"with the entry and another trigger", with, "/bot", "/bot deploy", []string{"deploy by alice on octo/app#7"}, "recorded", writer, false},
		{"with the entry, more words", with, "", "/agent deploy the staging site", []string{"run: deploy the staging site"}, "recorded", writer, false},
		{"with the entry, in a code span", with, "", "`/agent deploy`", nil, "ignored", nil, false},
		{"with the entry, quoted", with, "", "> /agent deploy\n\nwhat does this do?", nil, "ignored", nil, false},
		{"with the entry, help", with, "", "/agent help", nil, "help", nil, true},
		{"without the entry, help", without, "", "/agent help", nil, "help", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			took = nil
			mu.Unlock()
			authz := &askedAuthorizer{}
			gh := &postedComments{}
			var results []Result
			c := Config{Auth: authz, GitHub: gh, Trigger: tc.trigger, Result: func(r Result) {
				mu.Lock()
				defer mu.Unlock()
				results = append(results, r)
			}}
			rec := serverPath(t, tc.table, c, "issue_comment", issueComment(t, tc.body))
			if rec.Outcome != queue.OutcomeProcessed {
				t.Fatalf("delivery %s: outcome %q (%s)", rec.ID, rec.Outcome, rec.Error)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(results) != 1 || results[0].Outcome != tc.outcome {
				t.Errorf("results %+v, want one %q", results, tc.outcome)
			}
			if !slices.Equal(took, tc.took) {
				t.Errorf("handlers got %q, want %q", took, tc.took)
			}
			if asked := authz.requests(); !reflect.DeepEqual(asked, tc.asked) {
				t.Errorf("authorized %+v, want %+v", asked, tc.asked)
			}
			posted := gh.posted()
			if !tc.help {
				if len(posted) != 0 {
					t.Errorf("posted %q", posted)
				}
				return
			}
			if len(posted) != 1 || posted[0] != tc.table.help("") {
				t.Fatalf("posted %q, want the table's help", posted)
			}
		})
	}

	// The help: the entry's row and example, and nothing else, are added.
	row := "| `/agent deploy` | " + entry.Summary + " | " + entry.who() + " |\n"
	example := "/agent deploy\n"
	helpWith, helpWithout := with.help(""), without.help("")
	if strings.Contains(helpWithout, string(word)) {
		t.Fatalf("the help without the entry mentions %s:\n%s", word, helpWithout)
	}
	if strings.Count(helpWith, row) != 1 || strings.Count(helpWith, example) != 1 {
		t.Fatalf("the help with the entry lacks its row or example:\n%s", helpWith)
	}
	if got := strings.Replace(strings.Replace(helpWith, row, "", 1), example, "", 1); got != helpWithout {
		t.Errorf("the entry changed more of the help than its row and example:\n%s", helpWith)
	}
	if h := with.help("/bot"); !strings.Contains(h, "| `/bot deploy` | "+entry.Summary) || !strings.Contains(h, "\n/bot deploy\n") {
		t.Errorf("the help for /bot:\n%s", h)
	}

	// The withdrawal of queued requests (a cancel, a closed pull request)
	// reads a queued comment with the same table: with the entry, a
	// queued `/agent deploy` is not a request to start a run.
	repo := github.Repo{Owner: "octo", Name: "app"}
	del := queue.Delivery{ID: "queued-1", Event: "issue_comment", Body: issueComment(t, "/agent deploy")}
	for _, tc := range []struct {
		table routeTable
		want  bool
	}{{without, true}, {with, false}} {
		d := newTestDispatcher(t, Config{})
		d.routes = tc.table
		if who, ok := d.startsRunOn(del, repo, 7); ok != tc.want || (ok && who != "alice") {
			t.Errorf("with %d routes, a queued /agent deploy starts a run: %v (%q), want %v", len(tc.table), ok, who, tc.want)
		}
	}
}
