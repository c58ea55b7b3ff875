package dispatch

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
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
			rec := serverPath(t, tc.table, authz, []byte(dismissedReview))
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
	// help with who may use it. (The parser's words and the commands'
	// descriptions are bot/command's: see routes.)
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

// serverPath sends body as a signed pull_request_review delivery through
// the server's path — the webhook handler, a log queue, a worker and a
// dispatcher built by New — with every one of them taking the events or
// routes of table, and returns the delivery's record once the worker is
// done with it.
func serverPath(t *testing.T, table routeTable, authz Authorizer, body []byte) queue.Record {
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
	req.Header.Set(webhook.EventHeader, "pull_request_review")
	req.Header.Set(webhook.DeliveryHeader, id)
	req.Header.Set(webhook.SignatureHeader, webhook.Sign(secret, body))
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	if w.Code != http.StatusAccepted {
		t.Fatalf("intake answered %d: %s", w.Code, w.Body)
	}

	d := newTestDispatcher(t, Config{Auth: authz})
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
// one the parser gives back, and has its description for the help: a
// route for a word bot/command does not know (its parse rule and
// description are the other half of a new `/agent` word) fails here
// instead of never being reached.
func TestEveryRoutedCommandIsParsed(t *testing.T) {
	descs := map[command.Name]bool{}
	for _, d := range command.Descriptions() {
		descs[d.Name] = d.Summary != ""
	}
	n := 0
	for _, r := range routes() {
		if r.Command == "" {
			continue
		}
		n++
		p := command.Parse(command.DefaultTrigger+" "+string(r.Command), "")
		got := p.Name
		if p.Kind == command.Command {
			got = p.Command.Name
		}
		if got != r.Command || (p.Kind != command.Command && p.Kind != command.Help && p.Kind != command.Invalid) {
			t.Errorf("route %s: `%s %s` parses as %v %q, not as its command", r.Handler, command.DefaultTrigger, r.Command, p.Kind, got)
		}
		if !descs[r.Command] {
			t.Errorf("route %s: command %s has no description for the help", r.Handler, r.Command)
		}
	}
	if n < 8 {
		t.Errorf("the route table has %d commands", n)
	}
	// The check is not blind: a word the parser does not know is a
	// request in free text.
	if p := command.Parse(command.DefaultTrigger+" deploy", ""); p.Kind != command.Command || p.Command.Name != command.Run {
		t.Errorf("`%s deploy` parses as %+v", command.DefaultTrigger, p)
	}
}
