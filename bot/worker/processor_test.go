package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/webhook"
)

// fakeDispatcher records every webhook.Trigger and fails the delivery IDs it is
// told to.
type fakeDispatcher struct {
	mu       sync.Mutex
	got      []webhook.Trigger
	failWith map[string]error
}

func (f *fakeDispatcher) Dispatch(ctx context.Context, t webhook.Trigger) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, t)
	return f.failWith[t.DeliveryID]
}

func (f *fakeDispatcher) triggers() []webhook.Trigger {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]webhook.Trigger(nil), f.got...)
}

// steppingClock jumps ten minutes per reading, so that every retry backoff
// has passed by the next claim.
type steppingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(10 * time.Minute)
	return c.t
}

// waitDrained waits until the queue has nothing left to do.
func waitDrained(t *testing.T, q queue.Queue) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := q.Depth(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue still holds %d deliveries", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestProcessor(t *testing.T) {
	q, _ := openTestQueue(t)
	clock := &steppingClock{t: time.Unix(1_700_000_000, 0)}
	setNow(q, clock.now)
	obs := &recorder{}
	e := newEngine(webhook.NewHandler(webhook.Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))

	setSender := func(login string) func(m map[string]any) {
		return func(m map[string]any) { obj(m, "sender")["login"] = login }
	}
	comment := exampleOf(t, "issue_comment", "created", 3)
	deliveries := []struct {
		id, event string
		body      []byte
	}{
		{"human", "issue_comment", comment},
		// Another comment (a new id: the same one again would be a replay).
		{"own-comment", "issue_comment", mutate(t, comment, func(m map[string]any) { setSender("AgentOS[bot]")(m); obj(m, "comment")["id"] = 987654321 })},
		{"own-pr-opened", "pull_request", mutate(t, exampleOf(t, "pull_request", "opened", 0), setSender("agentos[bot]"))},
		{"edited", "issue_comment", exampleOf(t, "issue_comment", "edited", 0)},
		{"review", "pull_request_review", exampleOf(t, "pull_request_review", "submitted", 1)},
		{"transient", "pull_request", exampleOf(t, "pull_request", "synchronize", 0)},
		{"permanent", "pull_request", exampleOf(t, "pull_request", "closed", 0)},
		{"incomplete", "issue_comment", []byte(`{"action":"created","sender":{"login":"x"}}`)},
		{"undecodable", "issue_comment", []byte(`{"action":"created","issue":{"number":"one"}}`)},
	}
	for _, d := range deliveries {
		if w := post(t, e, signed(d.event, d.id, d.body)); w.Code != http.StatusAccepted {
			t.Fatalf("%s: %d %s", d.id, w.Code, w.Body)
		}
	}
	disp := &fakeDispatcher{failWith: map[string]error{
		"transient": errors.New("runtime busy"),
		"permanent": fmt.Errorf("no such repository: %w", webhook.ErrPermanent),
	}}
	p := &Processor{Events: testEvents, Queue: q, Dispatch: disp, BotLogin: "agentos[bot]", Observer: obs, Workers: 3, MaxAttempts: 3}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitDrained(t, q)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	var ids []string
	for _, tr := range disp.triggers() {
		ids = append(ids, tr.DeliveryID)
		if tr.DeliveryID == "human" && (tr.Kind != webhook.KindComment || tr.Author != "Codertocat" || tr.Number != 1) {
			t.Errorf("human comment trigger %+v", tr)
		}
	}
	sort.Strings(ids)
	if want := "[human permanent review transient transient transient]"; fmt.Sprint(ids) != want {
		t.Errorf("dispatched %v, want %s", ids, want)
	}
	// Only the attempt after which the processor gives up is final (with
	// MaxAttempts 3: the third dispatch of "transient").
	var final []string
	for _, tr := range disp.triggers() {
		if tr.FinalAttempt {
			final = append(final, fmt.Sprintf("%s#%d", tr.DeliveryID, tr.Attempt))
		}
	}
	if fmt.Sprint(final) != "[transient#3]" {
		t.Errorf("final attempts %v, want [transient#3]", final)
	}

	want := map[string]struct {
		outcome, err string
		attempts     int
	}{
		"human":         {queue.OutcomeProcessed, "", 1},
		"own-comment":   {queue.OutcomeIgnored, "the bot's own event", 1},
		"own-pr-opened": {queue.OutcomeIgnored, "the bot's own event", 1},
		"edited":        {queue.OutcomeIgnored, `issue_comment action "edited" is not handled`, 1},
		"review":        {queue.OutcomeProcessed, "", 1},
		"transient":     {queue.OutcomeFailed, "dispatch: runtime busy (gave up after 3 failed attempts)", 3},
		"permanent":     {queue.OutcomeFailed, "dispatch: no such repository: permanent failure", 1},
		"incomplete":    {queue.OutcomeFailed, "payload lacks issue or comment", 1},
		"undecodable":   {queue.OutcomeFailed, "decode: json: cannot unmarshal", 1},
	}
	for id, w := range want {
		rec, ok, err := q.Get(context.Background(), id)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", id, ok, err)
		}
		if rec.State != "done" || rec.Outcome != w.outcome || !strings.HasPrefix(rec.Error, w.err) || rec.Attempts != w.attempts {
			t.Errorf("%s: state %s outcome %s error %q attempts %d; want done %s %q %d", id, rec.State, rec.Outcome, rec.Error, rec.Attempts, w.outcome, w.err, w.attempts)
		}
	}
	counts := map[string]int{}
	for _, c := range obs.list() {
		counts[c]++
	}
	wantCounts := map[string]int{
		"issue_comment processed": 1, "issue_comment ignored": 2, "issue_comment failed": 2,
		"pull_request ignored": 1, "pull_request retry": 2, "pull_request failed": 2,
		"pull_request_review processed": 1,
	}
	if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
		t.Errorf("observer counts %v, want %v", counts, wantCounts)
	}
}

// blockingDispatcher holds every dispatch until released.
type blockingDispatcher struct {
	started chan string
	release chan struct{}
}

func (b *blockingDispatcher) Dispatch(ctx context.Context, t webhook.Trigger) error {
	b.started <- t.DeliveryID
	<-b.release
	return nil
}

func TestProcessorFinishesInFlightWorkOnShutdown(t *testing.T) {
	q, _ := openTestQueue(t)
	e := newEngine(webhook.NewHandler(webhook.Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))
	if w := post(t, e, signed("issue_comment", "slow", exampleOf(t, "issue_comment", "created", 0))); w.Code != 202 {
		t.Fatal(w.Code)
	}
	disp := &blockingDispatcher{started: make(chan string, 1), release: make(chan struct{})}
	p := &Processor{Events: testEvents, Queue: q, Dispatch: disp, BotLogin: "agentos[bot]", Workers: 2}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	if id := <-disp.started; id != "slow" {
		t.Fatalf("dispatched %s", id)
	}
	cancel()
	select {
	case <-done:
		t.Fatal("Run returned while a dispatch was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(disp.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec, _, _ := q.Get(context.Background(), "slow")
	if rec.State != "done" || rec.Outcome != queue.OutcomeProcessed {
		t.Errorf("after shutdown: %+v", rec)
	}
}

func TestProcessorConfig(t *testing.T) {
	q, _ := openTestQueue(t)
	for _, p := range []*Processor{{}, {Queue: q}, {Queue: q, Dispatch: &fakeDispatcher{}}} {
		if err := p.Run(context.Background()); err == nil {
			t.Errorf("Run(%+v) returned nil", *p)
		}
	}
}
