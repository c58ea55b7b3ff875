package api

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/agentos/agentos/bot/queue"
)

// TestDeliveriesDead: GET /v1/deliveries?state=dead lists the dead
// letters of the queue (behind the token), and agentos_queue_dead counts
// them.
func TestDeliveriesDead(t *testing.T) {
	q, err := queue.OpenLogQueue(filepath.Join(t.TempDir(), "q"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	for _, id := range []string{"ok", "bad"} {
		if _, err := q.Enqueue(ctx, queue.Delivery{ID: id, Event: "issue_comment", Action: "created", Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		d, _, err := q.Claim(ctx)
		if err != nil {
			t.Fatal(err)
		}
		outcome, msg := queue.OutcomeProcessed, ""
		if d.ID == "bad" {
			outcome, msg = queue.OutcomeFailed, "decode: broken"
		}
		if err := q.Done(ctx, d.ID, outcome, msg); err != nil {
			t.Fatal(err)
		}
	}
	m := NewMetrics()
	m.SetDeadLetters(func() float64 { n, _ := q.Dead(ctx); return float64(n) })
	e := newTestEnv(t, Options{Token: testToken, Deliveries: q, Metrics: m})
	if r := e.do(t, http.MethodGet, "/v1/deliveries?state=dead", "-", ""); r.status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", r.status)
	}
	r := e.do(t, http.MethodGet, "/v1/deliveries?state=dead", "Bearer "+testToken, "")
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var got struct {
		State      string         `json:"state"`
		Deliveries []DeliveryView `json:"deliveries"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if got.State != "dead" || len(got.Deliveries) != 1 || got.Deliveries[0].ID != "bad" || got.Deliveries[0].Error != "decode: broken" || got.Deliveries[0].Outcome != "failed" {
		t.Fatalf("%s", r.body)
	}
	for _, bad := range []string{"/v1/deliveries", "/v1/deliveries?state=zombie", "/v1/deliveries?state=dead&limit=0"} {
		if r := e.do(t, http.MethodGet, bad, "Bearer "+testToken, ""); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d", bad, r.status)
		}
	}
	if !hasLine(e.scrape(t), "agentos_queue_dead 1") {
		t.Error("agentos_queue_dead is not 1")
	}
	none := newTestEnv(t, Options{Token: testToken})
	if r := none.do(t, http.MethodGet, "/v1/deliveries?state=dead", "Bearer "+testToken, ""); r.status != http.StatusNotFound {
		t.Errorf("no queue: %d", r.status)
	}
}
