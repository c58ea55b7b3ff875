package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/schemas"
)

// TestCancelRun: POST /v1/runs/:id/cancel is authorized like the other
// writes and takes the RunManager's cancel path: a paused run ends
// cancelled (run.cancelled, a cancelled terminal report) and the log
// verifies; a session with nothing to cancel is 409, an unknown one 404.
func TestCancelRun(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken})
	mustAppend(t, env.store, "s1", append(startDrafts("r1", "p"), pauseDrafts("r1", "ap-1")...)...)
	auth := "Bearer " + testToken
	body := `{"by": "octocat", "reason": "not needed"}`
	if r := env.do(t, http.MethodPost, "/v1/runs/s1/cancel", "", body); r.status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d %s", r.status, r.body)
	}
	if r := env.do(t, http.MethodPost, "/v1/runs/s1/cancel", "Bearer wrong-token-0123456789ab", body); r.status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d %s", r.status, r.body)
	}
	if r := env.do(t, http.MethodPost, "/v1/runs/s1/cancel", auth, `{}`); r.status != http.StatusBadRequest {
		t.Fatalf("without by: %d %s", r.status, r.body)
	}
	if r := env.do(t, http.MethodPost, "/v1/runs/nope/cancel", auth, body); r.status != http.StatusNotFound || r.errorCode() != "unknown_session" {
		t.Fatalf("unknown session: %d %s", r.status, r.body)
	}
	r := env.do(t, http.MethodPost, "/v1/runs/s1/cancel", auth, body)
	var got cancelResponse
	if r.status != http.StatusOK || json.Unmarshal(r.body, &got) != nil || got.Status != string(agentrun.StatusCancelled) || got.Terminal == nil || got.Terminal.Status != agentrun.StatusCancelled {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	evs, err := env.store.Read(context.Background(), "s1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
		t.Fatalf("log does not verify: %v", rep.Problem)
	}
	var cancelled bool
	for _, e := range evs {
		if e.Type == event.RunCancelled {
			cancelled = event.FieldString(e.Payload, "by") == "octocat" && event.FieldString(e.Payload, "from") == "paused"
		}
	}
	if !cancelled {
		t.Error("no run.cancelled by octocat from paused")
	}
	if snap, _ := replay.Replay(evs); snap.RunStatus != "cancelled" {
		t.Errorf("snapshot run status %q", snap.RunStatus)
	}
	if r := env.do(t, http.MethodPost, "/v1/runs/s1/cancel", auth, body); r.status != http.StatusConflict || r.errorCode() != "not_cancellable" {
		t.Fatalf("second cancel: %d %s", r.status, r.body)
	}
}
