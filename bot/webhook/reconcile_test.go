package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/queue"
	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
)

// downQueue fails every Enqueue while down is set: the store is down and
// there is no spool, so the handler answers 503.
type downQueue struct {
	*queue.LogQueue
	down atomic.Bool
}

func (q *downQueue) Enqueue(ctx context.Context, d queue.Delivery) (bool, error) {
	if q.down.Load() {
		return false, errors.New("the database is down")
	}
	return q.LogQueue.Enqueue(ctx, d)
}

// appDeliveryWorld is the fake GitHub of the reconciler tests: octo/app
// with an issue n that dev (write access, token ghp_dev) comments on, and
// App 77 (its private key pemKey) installed there (installation 9001);
// api is its URL.
func appDeliveryWorld(t *testing.T) (f *fakegithub.Fake, api string, n int, pemKey []byte) {
	t.Helper()
	f = fakegithub.New(t)
	f.AddRepo(fakegithub.Repo{Owner: "octo", Name: "app"})
	f.AddToken("ghp_dev", "dev")
	f.SetPermission("octo/app", "dev", fakegithub.PermWrite)
	n = f.AddIssue("octo/app", fakegithub.Issue{Title: "bug", User: "dev"})
	app, pemKey, err := fakegithub.NewApp(77, "agentos")
	if err != nil {
		t.Fatal(err)
	}
	f.AddApp(app)
	f.AddInstallation(9001, 77, "octo/app")
	api = f.Serve(t)
	t.Cleanup(f.Close)
	return f, api, n, pemKey
}

// TestReconcilerRedeliversWhatFailed: three comments are delivered while
// the bot answers 503; GitHub does not retry them. The reconciler, as
// the App (JWT), finds them in the App's delivery log and asks GitHub to
// redeliver them, at most Max per pass; once redelivered (same GUIDs, now
// stored) it asks for nothing more.
func TestReconcilerRedeliversWhatFailed(t *testing.T) {
	ctx := context.Background()
	f, api, n, pemKey := appDeliveryWorld(t)

	q := &downQueue{LogQueue: openQueueAt(t, t.TempDir())}
	q.down.Store(true)
	srv := httptest.NewServer(newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil)))
	t.Cleanup(srv.Close)
	f.DeliverTo(srv.URL+"/webhook", testSecret)

	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/repos/octo/app/issues/%d/comments", api, n), strings.NewReader(fmt.Sprintf(`{"body":"/agent look %d"}`, i)))
		req.Header.Set("Authorization", "token ghp_dev")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("comment %d: %s", i, resp.Status)
		}
	}
	waitFor(t, func() bool { return len(f.HookAttempts()) == 3 })
	for _, a := range f.HookAttempts() {
		if a.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("attempt %+v, want 503 while the store is down", a)
		}
	}
	q.down.Store(false)

	atr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, 77, pemKey)
	if err != nil {
		t.Fatal(err)
	}
	gh := github.NewClient(&http.Client{Transport: atr})
	gh.BaseURL, _ = url.Parse(api + "/")
	r := &Reconciler{Hooks: gh.Apps, Events: testEvents, Max: 2,
		Known: func(ctx context.Context, guid string) (bool, error) {
			_, ok, err := q.Get(ctx, guid)
			return ok, err
		}}
	first, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if first.Listed != 3 || first.Failed != 3 || len(first.Redelivered) != 2 {
		t.Fatalf("first pass %+v, want 3 listed, 3 failed, 2 redelivered (Max)", first)
	}
	second, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second.Failed != 1 || len(second.Redelivered) != 1 {
		t.Fatalf("second pass %+v, want the third one redelivered", second)
	}
	third, err := r.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if third.Failed != 0 || len(third.Redelivered) != 0 {
		t.Fatalf("third pass %+v, want nothing left", third)
	}
	for _, d := range f.Deliveries() {
		if rec, ok, err := q.Get(ctx, d.ID); err != nil || !ok || rec.Event != "issue_comment" {
			t.Errorf("delivery %s not in the queue after the reconciler: %v %v", d.ID, ok, err)
		}
	}
	var redeliveries int
	for _, a := range f.HookAttempts() {
		if a.Redelivery {
			redeliveries++
			if a.StatusCode != http.StatusAccepted {
				t.Errorf("redelivery %+v, want 202", a)
			}
		}
	}
	if redeliveries != 3 {
		t.Errorf("%d redeliveries, want 3", redeliveries)
	}
	f.CheckNoViolations(t)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stubHooks is a delivery log held in memory, newest first, one page.
type stubHooks struct {
	log   []*github.HookDelivery
	asked []int64
}

func (s *stubHooks) ListHookDeliveries(ctx context.Context, opts *github.ListCursorOptions) ([]*github.HookDelivery, *github.Response, error) {
	return s.log, &github.Response{}, nil
}

func (s *stubHooks) RedeliverHookDelivery(ctx context.Context, id int64) (*github.HookDelivery, *github.Response, error) {
	s.asked = append(s.asked, id)
	return nil, nil, &github.AcceptedError{}
}

// TestReconcilerChooses: only handled events with no successful attempt,
// not held by the queue, are asked for, each at most PerGUID times.
func TestReconcilerChooses(t *testing.T) {
	now := time.Now()
	at := func(s int) *github.Timestamp {
		return &github.Timestamp{Time: now.Add(-time.Duration(s) * time.Second)}
	}
	d := func(id int64, guid, event string, status, ago int) *github.HookDelivery {
		return &github.HookDelivery{ID: github.Int64(id), GUID: github.String(guid), Event: github.String(event), StatusCode: github.Int(status), DeliveredAt: at(ago)}
	}
	hooks := &stubHooks{log: []*github.HookDelivery{
		d(7, "ok-later", "issue_comment", 202, 10), // redelivered with success
		d(6, "failed", "issue_comment", 503, 20),
		d(5, "ok-later", "issue_comment", 503, 30),
		d(4, "unhandled", "star", 400, 40),
		d(3, "held", "issue_comment", 0, 50), // timed out, but the queue has it
		d(2, "old-failed", "pull_request_review", 502, 60),
		d(1, "ancient", "issue_comment", 503, 48*3600), // before the lookback
	}}
	r := &Reconciler{Hooks: hooks, Events: testEvents, PerGUID: 2,
		Known: func(_ context.Context, guid string) (bool, error) { return guid == "held", nil }}
	res, err := r.Pass(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(res.Redelivered), "[old-failed failed]"; got != want || res.Listed != 6 {
		t.Fatalf("redelivered %s of %d listed, want %s (oldest first) of 6", got, res.Listed, want)
	}
	if got, want := fmt.Sprint(hooks.asked), "[2 6]"; got != want {
		t.Fatalf("asked for attempts %s, want %s", got, want)
	}
	// The same failures again: asked once more, then never (PerGUID 2).
	r.seen = time.Time{}
	if res, _ := r.Pass(context.Background()); len(res.Redelivered) != 2 {
		t.Fatalf("second pass %+v, want both again", res)
	}
	r.seen = time.Time{}
	if res, _ := r.Pass(context.Background()); len(res.Redelivered) != 0 || res.Failed != 3 {
		t.Fatalf("third pass %+v, want nothing asked (PerGUID), 3 without a success (one held)", res)
	}
}
