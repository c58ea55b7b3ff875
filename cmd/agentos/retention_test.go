package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/storetest"
)

// TestRetentionPass: one pass deletes the finished deliveries and the
// ended sessions older than the settings, keeps a paused session however
// old, and counts what it deleted; a setting of forever deletes nothing.
func TestRetentionPass(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory(storetest.NewSealer(t))
	startRun := []event.Draft{
		{RunID: "r1", Type: event.SessionStart, Actor: "runtime", Payload: map[string]any{"prompt": "p"}},
		{RunID: "r1", Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": "r1", "prompt": "p"}},
	}
	if _, err := st.Append(ctx, "ended", 0, append(startRun, event.Draft{RunID: "r1", Type: event.SessionClose, Actor: "runtime", Payload: map[string]any{"ok": true}})...); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, "paused", 0, append(startRun, event.Draft{RunID: "r1", Type: event.RunPaused, Actor: "runtime", Payload: map[string]any{"reason": "approval"}})...); err != nil {
		t.Fatal(err)
	}
	q, err := queue.OpenLogQueue(filepath.Join(t.TempDir(), "q"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, id := range []string{"done", "open"} {
		if _, err := q.Enqueue(ctx, queue.Delivery{ID: id, Event: "issue_comment", Body: []byte(`{"id":"` + id + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if d, ok, err := q.Claim(ctx); err != nil || !ok || d.ID != "done" {
		t.Fatalf("Claim = %v, %v, %v", d.ID, ok, err)
	}
	if err := q.Done(ctx, "done", queue.OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}

	m := api.NewMetrics()
	r := &retention{store: st, queue: q, log: slog.New(slog.DiscardHandler), deleted: m}
	// Forever (and the defaults, an hour later): nothing goes.
	r.cfg, r.now = config.Retention{}, func() time.Time { return time.Now().Add(400 * 24 * time.Hour) }
	if res, err := r.pass(ctx); err != nil || res != (retentionResult{}) {
		t.Fatalf("pass with forever = %+v, %v", res, err)
	}
	r.cfg, r.now = config.Default().Retention, func() time.Time { return time.Now().Add(time.Hour) }
	if res, err := r.pass(ctx); err != nil || res != (retentionResult{}) {
		t.Fatalf("pass with the defaults an hour later = %+v, %v", res, err)
	}
	// 91 days later with {sessions: 90d, deliveries: 30d}.
	r.cfg = config.Retention{Sessions: 90 * 24 * time.Hour, Deliveries: 30 * 24 * time.Hour}
	r.now = func() time.Time { return time.Now().Add(91 * 24 * time.Hour) }
	res, err := r.pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (retentionResult{deliveries: 1, sessions: store.PruneResult{Sessions: 1, Events: 3}}); res != want {
		t.Fatalf("pass = %+v; want %+v", res, want)
	}
	if evs, _ := st.Read(ctx, "ended", 1); len(evs) != 0 {
		t.Error("the ended session is still stored")
	}
	if evs, _ := st.Read(ctx, "paused", 1); len(evs) != 3 {
		t.Errorf("the paused session has %d events; want 3", len(evs))
	}
	if _, ok, _ := q.Get(ctx, "done"); ok {
		t.Error("the finished delivery is still stored")
	}
	if _, ok, _ := q.Get(ctx, "open"); !ok {
		t.Error("the pending delivery was pruned")
	}
	for kind, want := range map[string]float64{"sessions": 1, "events": 3, "deliveries": 1} {
		if got := metricValue(t, m, "agentos_retention_deleted_total", kind); got != want {
			t.Errorf("agentos_retention_deleted_total{kind=%q} = %v; want %v", kind, got, want)
		}
	}
}

// metricValue is the value of m's metric name (its series with label
// value label, or its only series when label is empty).
func metricValue(t *testing.T, m *api.Metrics, name, label string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			if label != "" && (len(s.GetLabel()) == 0 || s.GetLabel()[0].GetValue() != label) {
				continue
			}
			if c := s.GetCounter(); c != nil {
				return c.GetValue()
			}
			return s.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s{%s} is not registered", name, label)
	return 0
}

// TestOldestClaimMetric: serve's gauge reads the queue's oldest claim.
func TestOldestClaimMetric(t *testing.T) {
	ctx := context.Background()
	q, err := queue.OpenLogQueue(filepath.Join(t.TempDir(), "q"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	m := api.NewMetrics()
	wireOldestClaim(m, q)
	gauge := func() float64 { return metricValue(t, m, "agentos_queue_oldest_claim_age_seconds", "") }
	if v := gauge(); v != 0 {
		t.Fatalf("gauge with no claim = %v", v)
	}
	if _, err := q.Enqueue(ctx, queue.Delivery{ID: "a", Event: "issue_comment", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := q.Claim(ctx); err != nil || !ok {
		t.Fatal(ok, err)
	}
	time.Sleep(20 * time.Millisecond)
	if v := gauge(); v < 0.02 || v > 60 {
		t.Fatalf("gauge with a claim 20ms old = %v", v)
	}
}

// TestServeRunsRetention: serve applies the retention settings at start
// (a pass logged with its counts) and refuses a bad period with the
// setting's name.
func TestServeRunsRetention(t *testing.T) {
	s := startServe(t, map[string]string{config.EnvRetentionSessions: "90d"}, "--retention-deliveries", "14d")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.logs.String(), "retention: pruned") {
		if time.Now().After(deadline) {
			t.Fatalf("no retention pass logged:\n%s", s.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	logs := s.logs.String()
	for _, want := range []string{"sessions=90d", "deliveries=14d", "sessions=0 events=0"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	err := serve(context.Background(), []string{"--data", t.TempDir(), "--retention-sessions", "90 days"}, io.Discard, serveDeps{getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "retention.sessions") || !strings.Contains(err.Error(), "--retention-sessions") {
		t.Fatalf("serve with a bad period = %v", err)
	}
}
