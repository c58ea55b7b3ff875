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
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
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
func startReplica(t *testing.T, dbURL, id string, env map[string]string, d webhook.Dispatcher) *served {
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
