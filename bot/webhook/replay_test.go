package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
)

func TestPayloadKey(t *testing.T) {
	comment := exampleOf(t, "issue_comment", "created", 0)
	setID := func(key string, id int) func(map[string]any) {
		return func(m map[string]any) { obj(m, key)["id"] = id }
	}
	push := exampleOf(t, "pull_request", "synchronize", 0)
	for _, tc := range []struct {
		name, event, action string
		body                []byte
		want                string
	}{
		{"comment", "issue_comment", "created", mutate(t, comment, setID("comment", 11)), "issue_comment.created:comment=11"},
		{"review comment", "pull_request_review_comment", "created", mutate(t, exampleOf(t, "pull_request_review_comment", "created", 0), setID("comment", 12)), "pull_request_review_comment.created:comment=12"},
		{"review", "pull_request_review", "submitted", mutate(t, exampleOf(t, "pull_request_review", "submitted", 0), setID("review", 13)), "pull_request_review.submitted:review=13"},
		{"push", "pull_request", "synchronize", mutate(t, push, func(m map[string]any) {
			pr := obj(m, "pull_request")
			pr["id"], pr["updated_at"] = 14, "2026-11-28T18:00:00Z"
			obj(pr, "head")["sha"] = "abc"
		}), "pull_request.synchronize:pr=14 head=abc updated=2026-11-28T18:00:00Z"},
		{"an action the bot ignores", "issue_comment", "edited", comment, ""},
		{"an event the bot ignores", "installation", "created", comment, ""},
		{"no comment id", "issue_comment", "created", []byte(`{"action":"created","comment":{"body":"x"}}`), ""},
		{"not JSON", "issue_comment", "created", []byte(`{`), ""},
	} {
		if got := PayloadKey(tc.event, tc.action, tc.body); got != tc.want {
			t.Errorf("%s: PayloadKey = %q, want %q", tc.name, got, tc.want)
		}
	}
	long := PayloadKey("pull_request", "closed", []byte(`{"pull_request":{"id":1,"updated_at":"`+strings.Repeat("9", 1000)+`"}}`))
	if len(long) > maxKey || !strings.HasPrefix(long, "pull_request.closed:sha256=") {
		t.Errorf("a long key is stored as %q", long)
	}
}

// replayRun sends deliveries to a handler over q, then takes every
// delivery the queue hands out (what the worker would dispatch) until it
// is drained, and returns them as the worker would see them.
func replayRun(t *testing.T, q queue.Queue, send func(e http.Handler)) []queue.Delivery {
	t.Helper()
	e := newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))
	send(e)
	var got []queue.Delivery
	for {
		d, ok := claim(t, q)
		if !ok {
			break
		}
		got = append(got, d)
		if err := q.Done(context.Background(), d.ID, queue.OutcomeProcessed, ""); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := q.Depth(context.Background()); err != nil || n != 0 {
		t.Fatalf("depth %d, %v after draining", n, err)
	}
	return got
}

// replays sends a signed body under a second delivery ID (a replay, 200
// duplicate), a genuinely new comment (202) and a push to a PR whose
// head came back after a force push (202: a new updated_at).
func replays(t *testing.T, e http.Handler) {
	t.Helper()
	comment := mutate(t, exampleOf(t, "issue_comment", "created", 0), func(m map[string]any) { obj(m, "comment")["id"] = 5001 })
	newer := mutate(t, comment, func(m map[string]any) { obj(m, "comment")["id"] = 5002 })
	push := func(updated string) []byte {
		return mutate(t, exampleOf(t, "pull_request", "synchronize", 0), func(m map[string]any) {
			pr := obj(m, "pull_request")
			pr["id"], pr["updated_at"] = 77, updated
			obj(pr, "head")["sha"] = strings.Repeat("a", 40)
		})
	}
	for _, d := range []struct {
		event, id string
		body      []byte
		code      int
	}{
		{"issue_comment", "delivery-1", comment, http.StatusAccepted},
		{"issue_comment", "delivery-1", comment, http.StatusOK},     // GitHub's redelivery
		{"issue_comment", "replayed-id", comment, http.StatusOK},    // the replay
		{"issue_comment", "replayed-id-2", comment, http.StatusOK},  // and again
		{"issue_comment", "delivery-2", newer, http.StatusAccepted}, // a new comment
		{"pull_request", "push-1", push("2026-11-28T18:00:00Z"), http.StatusAccepted},
		{"pull_request", "push-replayed", push("2026-11-28T18:00:00Z"), http.StatusOK},
		{"pull_request", "push-2", push("2026-11-28T18:05:00Z"), http.StatusAccepted}, // the same head again, later
	} {
		w := post(t, e, signed(d.event, d.id, d.body))
		if w.Code != d.code || (d.code == http.StatusOK && !strings.Contains(w.Body.String(), `"duplicate":true`)) {
			t.Errorf("%s %s: %d %s, want %d", d.event, d.id, w.Code, w.Body, d.code)
		}
	}
}

func checkRanOnce(t *testing.T, got []queue.Delivery) {
	t.Helper()
	var ids []string
	for _, d := range got {
		ids = append(ids, d.ID)
	}
	if strings.Join(ids, ",") != "delivery-1,delivery-2,push-1,push-2" {
		t.Errorf("handed out %v, want delivery-1,delivery-2,push-1,push-2: a replay is never stored, so nothing runs it", ids)
	}
}

// TestReplayUnderANewDeliveryID: the same signed body sent again with a
// new X-GitHub-Delivery is a duplicate and is not processed; a new
// comment is; the log queue still knows the replay after a restart.
func TestReplayUnderANewDeliveryID(t *testing.T) {
	q, path := openTestQueue(t)
	checkRanOnce(t, replayRun(t, q, func(e http.Handler) { replays(t, e) }))
	if rec, ok, _ := q.Get(context.Background(), "delivery-1"); !ok || rec.Key != "issue_comment.created:comment=5001" {
		t.Errorf("stored %+v, want its payload key", rec.Delivery)
	}
	if _, ok, _ := q.Get(context.Background(), "replayed-id"); ok {
		t.Error("the replay was stored")
	}
	q.Close()
	q = openQueueAt(t, path)
	e := newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))
	comment := mutate(t, exampleOf(t, "issue_comment", "created", 0), func(m map[string]any) { obj(m, "comment")["id"] = 5001 })
	if w := post(t, e, signed("issue_comment", "after-restart", comment)); w.Code != http.StatusOK {
		t.Errorf("replay after a restart: %d %s, want 200 duplicate", w.Code, w.Body)
	}
	if n, _ := q.Depth(context.Background()); n != 0 {
		t.Errorf("depth %d after the replay", n)
	}
}

// TestPGQueueReplayUnderANewDeliveryID is the same with PostgreSQL, and a
// replay sent to several replicas at once is stored at most once.
func TestPGQueueReplayUnderANewDeliveryID(t *testing.T) {
	u := pgtest.Schema(t, pgtest.URL(t))
	q := openPGQueueAt(t, u, queue.PGQueueOptions{})
	checkRanOnce(t, replayRun(t, q, func(e http.Handler) { replays(t, e) }))
	if rec, ok, _ := q.Get(context.Background(), "delivery-1"); !ok || rec.Key != "issue_comment.created:comment=5001" {
		t.Errorf("stored %+v, want its payload key", rec.Delivery)
	}

	reps := []*queue.PGQueue{q, openPGQueueAt(t, u, queue.PGQueueOptions{}), openPGQueueAt(t, u, queue.PGQueueOptions{})}
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := queue.Delivery{ID: fmt.Sprintf("burst-%d", i), Event: "issue_comment", Action: "created", Key: "issue_comment.created:comment=6001", Body: []byte(`{}`)}
			dup, err := reps[i%len(reps)].Enqueue(context.Background(), d)
			if err != nil {
				t.Error(err)
				return
			}
			if !dup {
				mu.Lock()
				stored++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if stored != 1 {
		t.Errorf("%d of 30 deliveries with one payload key stored, want 1", stored)
	}
}
