package worker

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/corpus"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/webhook"
)

// wantActed says which (event, action) pairs the bot acts on; every other
// handled delivery is accepted and then ignored.
func wantActed(event, action string) bool {
	switch event {
	case "issue_comment", "pull_request_review_comment":
		return action == "created"
	case "pull_request_review":
		return action == "submitted" // a dismissed review has no route
	case "pull_request":
		return action == "closed" || action == "synchronize"
	case "installation", "installation_repositories":
		return true
	}
	return false
}

// TestCorpus posts every example payload of GitHub's webhooks-examples for
// the events below through the gin handler, signed as GitHub signs, then
// processes what was accepted.
func TestCorpus(t *testing.T) {
	examples := corpus.Examples(t, "issue_comment", "pull_request", "pull_request_review", "pull_request_review_comment",
		"issues", "installation", "installation_repositories", "ping")
	q, _ := openTestQueue(t)
	e := newEngine(webhook.NewHandler(webhook.Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))

	wantOutcome := map[string]string{}
	perEvent := map[string]int{}
	keys := map[string]bool{}
	for i, ex := range examples {
		id := fmt.Sprintf("corpus-%03d", i)
		perEvent[ex.Event]++
		name := fmt.Sprintf("%s.%s#%d", ex.Event, ex.Action, i)

		bad := signed(ex.Event, id+"-bad", ex.Body)
		bad.sig = webhook.Sign([]byte("not the secret"), ex.Body)
		if w := post(t, e, bad); w.Code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong signature: %d %s, want 401", name, w.Code, w.Body)
		}

		w := post(t, e, signed(ex.Event, id, ex.Body))
		want := http.StatusAccepted
		switch ex.Event {
		case "ping":
			want = http.StatusOK
		case "issues":
			want = http.StatusBadRequest
		}
		// Examples that report the same comment, review or push as an
		// earlier one are replays of it.
		key := webhook.PayloadKey(ex.Event, ex.Action, ex.Body)
		replay := key != "" && keys[key]
		keys[key] = true
		if replay {
			want = http.StatusOK
			if w.Code != want || !strings.Contains(w.Body.String(), "duplicate") {
				t.Errorf("%s repeats %s: %d %s, want 200 duplicate", name, key, w.Code, w.Body)
			}
			continue
		}
		if w.Code != want {
			t.Errorf("%s: %d %s, want %d", name, w.Code, w.Body, want)
		}
		if want == http.StatusAccepted {
			wantOutcome[id] = queue.OutcomeIgnored
			if wantActed(ex.Event, ex.Action) {
				wantOutcome[id] = queue.OutcomeProcessed
			}
		}
	}
	for _, ev := range []string{"issue_comment", "pull_request", "pull_request_review", "pull_request_review_comment", "issues", "installation", "ping"} {
		if perEvent[ev] == 0 {
			t.Errorf("the corpus has no %s example", ev)
		}
	}

	disp := &fakeDispatcher{}
	p := &Processor{Events: testEvents, Queue: q, Dispatch: disp, BotLogin: "agentos[bot]", Workers: 2}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitDrained(t, q)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	for id, want := range wantOutcome {
		rec, ok, err := q.Get(context.Background(), id)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", id, ok, err)
		}
		if rec.Outcome != want {
			t.Errorf("%s (%s.%s): outcome %s %q, want %s", id, rec.Event, rec.Action, rec.Outcome, rec.Error, want)
		}
	}
	processed := 0
	for _, o := range wantOutcome {
		if o == queue.OutcomeProcessed {
			processed++
		}
	}
	if got := len(disp.triggers()); got != processed {
		t.Errorf("dispatched %d triggers, want %d", got, processed)
	}
	for _, tr := range disp.triggers() {
		if tr.Kind == "" || tr.DeliveryID == "" || tr.Author == "" || (tr.Kind != webhook.KindInstallation && (tr.Repo == "" || tr.Number == 0)) {
			t.Errorf("incomplete trigger %+v", tr)
		}
	}
	t.Logf("%d examples: %d accepted, %d dispatched", len(examples), len(wantOutcome), processed)
}
