package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/bot/worker"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store/postgres"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
	"github.com/agentos/agentos/schemas"
	"github.com/jackc/pgx/v5/pgxpool"
)

// countingDispatcher records every Trigger it is handed, across replicas.
type countingDispatcher struct {
	mu   sync.Mutex
	seen map[string]int // delivery ID → dispatches
	fail map[string]bool
}

func (c *countingDispatcher) Dispatch(ctx context.Context, t webhook.Trigger) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[t.DeliveryID]++
	if c.fail[t.DeliveryID] {
		return fmt.Errorf("this delivery always fails: %w", webhook.ErrPermanent)
	}
	return nil
}

func (c *countingDispatcher) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.seen))
	for k, v := range c.seen {
		out[k] = v
	}
	return out
}

// startReplica runs `agentos serve --store dbURL` as replica id, its
// deliveries handed to d.
func startReplica(t *testing.T, dbURL, id string, env map[string]string, d worker.Dispatcher) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	full := map[string]string{"AGENTOS_REPLICA_ID": id}
	for k, v := range env {
		full[k] = v
	}
	logs := &logBuf{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	deps := serveDeps{getenv: func(k string) string { return full[k] }, listener: ln, logger: slog.New(slog.NewTextHandler(logs, nil)), dispatch: d}
	data := t.TempDir()
	cfgFile := writeConfig(t, "bot_login: agentos-bot\n")
	go func() {
		done <- serve(ctx, []string{"--data", data, "--store", dbURL, "--config", cfgFile}, io.Discard, deps)
	}()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() { cancel(); stopErr = <-done })
		return stopErr
	}
	t.Cleanup(func() { stop() })
	s := &served{url: "http://" + ln.Addr().String(), data: data, logs: logs, stop: stop}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not ready: %v\n%s", id, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func commentPayload(n int) string {
	return fmt.Sprintf(`{"action":"created","issue":{"number":%d,"state":"open"},"comment":{"id":%d,"body":"/agent fix it","user":{"login":"alice","type":"User"},"author_association":"OWNER"},"repository":{"full_name":"o/r","name":"r","owner":{"login":"o"}},"sender":{"login":"alice","type":"User"}}`, n, 1000+n)
}

// TestServeReplicasOnPostgres: three `agentos serve --store postgres://…`
// replicas behind a round-robin stand-in for the load balancer. The same
// delivery sent to all three is accepted once (202, then 200 duplicate)
// and dispatched once; a stream of deliveries spread over the replicas is
// dispatched exactly once each; the dead letter is listed by any replica.
func TestServeReplicasOnPostgres(t *testing.T) {
	db := pgtest.URL(t)
	const secret = "replica-webhook-secret"
	env := map[string]string{"AGENTOS_WEBHOOK_SECRET": secret, "AGENTOS_API_TOKEN": serveToken}
	disp := &countingDispatcher{seen: map[string]int{}, fail: map[string]bool{"d-dead": true}}
	var reps []*served
	for i := 0; i < 3; i++ {
		reps = append(reps, startReplica(t, db, fmt.Sprintf("replica-%d", i), env, disp))
	}
	send := func(rep *served, id string, n int) int {
		body := commentPayload(n)
		code, resp := httpDo(t, http.MethodPost, rep.url+"/webhook", "", body, map[string]string{
			"X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": id, "Content-Type": "application/json",
			"X-Hub-Signature-256": webhook.Sign([]byte(secret), []byte(body)),
		})
		if code != http.StatusAccepted && code != http.StatusOK {
			t.Fatalf("%s to %s: %d %s", id, rep.url, code, resp)
		}
		return code
	}
	// The same delivery to all three.
	var codes []int
	for _, r := range reps {
		codes = append(codes, send(r, "d-same", 1))
	}
	if fmt.Sprint(codes) != "[202 200 200]" {
		t.Fatalf("same delivery to three replicas answered %v", codes)
	}
	const n = 60
	for i := 0; i < n; i++ {
		send(reps[i%3], fmt.Sprintf("d-%d", i), i+2)
	}
	send(reps[1], "d-dead", 99)
	deadline := time.Now().Add(60 * time.Second)
	for {
		seen := disp.snapshot()
		if len(seen) == n+2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d deliveries dispatched", len(seen), n+2)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a double dispatch would show now
	for id, c := range disp.snapshot() {
		if c != 1 {
			t.Errorf("%s dispatched %d times", id, c)
		}
	}
	code, body := httpDo(t, http.MethodGet, reps[2].url+"/v1/deliveries?state=dead", serveToken, "", nil)
	var dead struct {
		Deliveries []struct{ ID, Error string } `json:"deliveries"`
	}
	if err := json.Unmarshal(body, &dead); err != nil || code != http.StatusOK || len(dead.Deliveries) != 1 || dead.Deliveries[0].ID != "d-dead" {
		t.Fatalf("dead letters: %d %s", code, body)
	}
	_, metrics := httpDo(t, http.MethodGet, reps[0].url+"/metrics", "", "", nil)
	if !strings.Contains(string(metrics), "agentos_queue_dead 1") || !strings.Contains(string(metrics), "agentos_queue_depth 0") {
		t.Errorf("metrics:\n%s", metrics)
	}
	for _, r := range reps {
		if err := r.stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		if !strings.Contains(r.logs.String(), "backend=postgres") {
			t.Errorf("the log does not name the store:\n%s", r.logs.String())
		}
	}
}

// openPGStore opens the PostgreSQL event store on a fresh schema (its pool
// closed when the test ends; the caller closes the store) and returns it
// with the schema's connection string, for the CLI's AGENTOS_DATABASE_URL.
func openPGStore(t *testing.T) (*postgres.Store, string) {
	t.Helper()
	u := pgtest.Schema(t, pgtest.URL(t))
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	sealer, _ := newSealer(nil)
	st, err := postgres.Open(context.Background(), pool, sealer, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st, u
}

// TestReplayFromPostgres: `agentos replay SESSION` reads the session from
// PostgreSQL when AGENTOS_DATABASE_URL is set.
func TestReplayFromPostgres(t *testing.T) {
	ctx := context.Background()
	st, u := openPGStore(t)
	if _, err := st.Append(ctx, "pg-session", 0,
		event.Draft{RunID: "r1", Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "hello from a replica"}},
		event.Draft{RunID: "r1", Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": "r1", "prompt": "hello from a replica"}},
	); err != nil {
		t.Fatal(err)
	}
	st.Close()
	t.Setenv("AGENTOS_DATABASE_URL", u)
	out, errOut, code := runCLI(t, "replay", "pg-session", "--json")
	if code != 0 || !strings.Contains(out, `"run_status": "running"`) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "replay", "no-such-session"); code != 1 || !strings.Contains(errOut, "no session no-such-session in PostgreSQL") {
		t.Fatalf("unknown session: exit %d %s", code, errOut)
	}
}

// TestServeApprovalAtAnotherReplica: over the HTTP API, a run started on
// replica A pauses for approval; the answer goes to replica B, which never
// saw the session. While A (still) holds the session's lease, B answers
// 409 session_busy and records nothing; once the lease is free, B records
// the answer and resumes the run from the shared log to completed, and
// the log holds one run with one terminal report.
func TestServeApprovalAtAnotherReplica(t *testing.T) {
	repo, env := demoSetup(t)
	db := pgtest.URL(t)
	a := startReplica(t, db, "replica-a", env, nil)
	b := startReplica(t, db, "replica-b", env, nil)
	const sid = "across-replicas-1"
	code, body := httpDo(t, http.MethodPost, a.url+"/v1/runs", serveToken, `{"session_id": "`+sid+`", "repo_dir": "`+repo+`", "prompt": "`+demo.Prompt+`"}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("start at A: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	follow := func(url string, after int64, until string) (int64, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/runs/"+sid+"/events", nil)
		req.Header.Set("Authorization", "Bearer "+serveToken) // every read is authorized
		if after > 0 {
			req.Header.Set("Last-Event-ID", fmt.Sprint(after))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		evs := make(chan event.Event, 256)
		go sseEvents(resp.Body, evs)
		var approval string
		for e := range evs {
			if e.Seq != after+1 {
				t.Fatalf("event %d after %d", e.Seq, after)
			}
			after = e.Seq
			if e.Type == event.ApprovalRequested {
				approval = event.FieldString(e.Payload, "approval_id")
			}
			if e.Type == until {
				return after, approval
			}
		}
		t.Fatalf("the stream from %s ended before %s (ctx %v)", url, until, ctx.Err())
		return 0, ""
	}
	seq, approval := follow(a.url, 0, event.RunPaused)
	if approval == "" {
		t.Fatal("no approval requested")
	}
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	busy, err := postgres.OpenLeases(ctx, pool, postgres.LeaseOptions{Owner: "replica-a", TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	release, err := busy.Acquire(ctx, sid) // A works the session (say, a follow-up)
	if err != nil {
		t.Fatal(err)
	}
	answer := `{"session_id": "` + sid + `", "decision": "approve", "by": "octocat"}`
	code, body = httpDo(t, http.MethodPost, b.url+"/v1/approvals/"+approval, serveToken, answer, nil)
	if code != http.StatusConflict || !strings.Contains(string(body), "session_busy") {
		t.Fatalf("answer at B while A holds the lease: %d %s", code, body)
	}
	release()
	code, body = httpDo(t, http.MethodPost, b.url+"/v1/approvals/"+approval, serveToken, answer, nil)
	if code != http.StatusAccepted {
		t.Fatalf("answer at B: %d %s", code, body)
	}
	// Follow the rest from B, resuming after what A streamed.
	follow(b.url, seq, event.SessionClose)
	sealer, _ := newSealer(nil)
	st, err := postgres.Open(ctx, pool, sealer, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.Read(ctx, sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, e := range evs {
		count[e.Type]++
	}
	if count[event.RunStarted] != 1 || count[event.TurnTerminal] != 1 || count[event.RunCompleted] != 1 {
		t.Fatalf("log: %v", count)
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("log does not verify: %v", rep.Problem)
	}
}
