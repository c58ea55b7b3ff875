package worker

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/webhook"
)

// TestHandlerOnLogQueue: the handler's storage answers (202, duplicate,
// duplicate across a restart, 503 when closed) with the log queue, and
// the Processor dispatches what it stored.
func TestHandlerOnLogQueue(t *testing.T) {
	dir := t.TempDir()
	q := openLog(t, dir)
	body := []byte(`{"action":"created","issue":{"number":1},"comment":{"id":1,"body":"/agent hi"},"repository":{"full_name":"o/r","owner":{"login":"o"},"name":"r"},"sender":{"login":"u"}}`)
	r := signed("issue_comment", "d-log", body)
	e := newEngine(webhook.NewHandler(webhook.Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))
	if w := post(t, e, r); w.Code != http.StatusAccepted {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	if w := post(t, e, r); w.Code != 200 || w.Body.String() != `{"duplicate":true}` {
		t.Errorf("again: %d %s, want 200 duplicate", w.Code, w.Body)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if w := post(t, e, signed("issue_comment", "d-closed", body)); w.Code != http.StatusServiceUnavailable {
		t.Errorf("closed queue: %d, want 503", w.Code)
	}
	q2 := openLog(t, dir)
	e2 := newEngine(webhook.NewHandler(webhook.Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q2, nil))
	if w := post(t, e2, r); w.Code != 200 {
		t.Errorf("after restart: %d, want 200 duplicate", w.Code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	disp := &fakeDispatcher{}
	p := &Processor{Events: testEvents, Queue: q2, Dispatch: disp, BotLogin: "agentos[bot]", PollInterval: 10 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	waitDrained(t, q2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := disp.triggers(); len(got) != 1 || got[0].DeliveryID != "d-log" {
		t.Errorf("dispatched %+v, want d-log once", got)
	}
	if rec, ok, _ := q2.Get(context.Background(), "d-log"); !ok || rec.State != "done" || rec.Outcome != queue.OutcomeProcessed {
		t.Errorf("record %+v", rec)
	}
}
