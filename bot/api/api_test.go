package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentos/agentos/kernel/sandbox"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/sqlite"
)

func TestAuth(t *testing.T) {
	runBody := `{"repo_dir": "/tmp/repo", "prompt": "fix it"}`
	approvalBody := `{"session_id": "s1", "decision": "approve", "by": "octocat"}`
	cases := []struct {
		name       string
		configured string // the server's token
		header     string
		wantStatus int
		wantCode   string
	}{
		{"no token configured", "", "Bearer " + testToken, http.StatusForbidden, "api_disabled"},
		{"no token configured, no header", "", "", http.StatusForbidden, "api_disabled"},
		{"missing header", testToken, "", http.StatusUnauthorized, "unauthenticated"},
		{"basic scheme", testToken, "Basic " + testToken, http.StatusUnauthorized, "unauthenticated"},
		{"empty bearer", testToken, "Bearer ", http.StatusUnauthorized, "unauthenticated"},
		{"wrong token", testToken, "Bearer wrong-token-0123456789ab", http.StatusUnauthorized, "invalid_token"},
		{"token prefix", testToken, "Bearer " + testToken[:len(testToken)-1], http.StatusUnauthorized, "invalid_token"},
		{"token with suffix", testToken, "Bearer " + testToken + "x", http.StatusUnauthorized, "invalid_token"},
		{"right token", testToken, "Bearer " + testToken, 0, ""},
		{"scheme case-insensitive", testToken, "bearer " + testToken, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t, Options{Token: tc.configured})
			mustAppend(t, env.store, "s1", append(startDrafts("r1", "p"), pauseDrafts("r1", "ap-1")...)...)
			for _, ep := range []struct{ path, body string }{{"/v1/runs", runBody}, {"/v1/approvals/ap-1", approvalBody}} {
				r := env.do(t, http.MethodPost, ep.path, tc.header, ep.body)
				if tc.wantStatus == 0 {
					if r.status != http.StatusAccepted {
						t.Errorf("%s: got %d %s, want 202", ep.path, r.status, r.body)
					}
					continue
				}
				if r.status != tc.wantStatus || r.errorCode() != tc.wantCode {
					t.Errorf("%s: got %d %s, want %d %s", ep.path, r.status, r.body, tc.wantStatus, tc.wantCode)
				}
				if r.status == http.StatusUnauthorized && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s: 401 without WWW-Authenticate: Bearer", ep.path)
				}
			}
			// Reads need no token.
			if r := env.do(t, http.MethodGet, "/v1/runs/s1", "", ""); r.status != http.StatusOK {
				t.Errorf("GET snapshot: %d %s", r.status, r.body)
			}
		})
	}
}

func TestStartRunRejects(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken})
	mustAppend(t, env.store, "existing", append(startDrafts("r0", "p"), endDrafts("r0")...)...)
	cases := []struct {
		name, body string
		status     int
		code, msg  string
	}{
		{"empty body", ``, 400, "bad_request", "empty"},
		{"not json", `prompt=x`, 400, "bad_request", "invalid character"},
		{"unknown field", `{"repo_dir": "/r", "prompt": "x", "model": "gpt"}`, 400, "bad_request", "unknown field"},
		{"trailing data", `{"repo_dir": "/r", "prompt": "x"} {}`, 400, "bad_request", "after the JSON object"},
		{"no prompt", `{"repo_dir": "/r"}`, 400, "bad_request", "prompt"},
		{"blank prompt", `{"repo_dir": "/r", "prompt": "  "}`, 400, "bad_request", "prompt"},
		{"no repo nor session", `{"prompt": "x"}`, 400, "bad_request", "repo_dir"},
		{"session id with path", `{"session_id": "../etc", "repo_dir": "/r", "prompt": "x"}`, 400, "bad_request", "session_id"},
		{"session id with slash", `{"session_id": "a/b", "repo_dir": "/r", "prompt": "x"}`, 400, "bad_request", "session_id"},
		{"unknown session without repo", `{"session_id": "nope", "prompt": "x"}`, 404, "unknown_session", "repo_dir"},
		{"too large", `{"repo_dir": "/r", "prompt": "` + strings.Repeat("x", maxBody) + `"}`, 400, "bad_request", "too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, tc.body)
			var b ErrorBody
			if err := json.Unmarshal(r.body, &b); err != nil {
				t.Fatalf("error body is not JSON: %s", r.body)
			}
			if r.status != tc.status || b.Error.Code != tc.code || !strings.Contains(b.Error.Message, tc.msg) {
				t.Errorf("got %d %+v, want %d %s containing %q", r.status, b.Error, tc.status, tc.code, tc.msg)
			}
		})
	}
	if n := len(env.runs.prepared); n != 0 {
		t.Errorf("%d rejected requests reached Prepare", n)
	}
}

func TestStartRunPrepareErrorIs422(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken})
	env.runs.prepareErr = errors.New("repo: /nope is not a directory")
	r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, `{"repo_dir": "/nope", "prompt": "x", "session_id": "s1"}`)
	if r.status != http.StatusUnprocessableEntity || r.errorCode() != "cannot_start" || !strings.Contains(string(r.body), "not a directory") {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	// The failed start released the session.
	env.runs.prepareErr = nil
	if r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, `{"repo_dir": "/r", "prompt": "x", "session_id": "s1"}`); r.status != http.StatusAccepted {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
}

func TestStartRunStreamsToCompletion(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken})
	r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, `{"repo_dir": "/srv/repo", "prompt": "greet the world"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	var sr startResponse
	if err := json.Unmarshal(r.body, &sr); err != nil || !ValidSessionID(sr.SessionID) || !strings.HasPrefix(sr.SessionID, "api-") {
		t.Fatalf("response %s: %v", r.body, err)
	}
	if got, want := r.header.Get("Location"), "/v1/runs/"+sr.SessionID; got != want || sr.EventsURL != want+"/events" {
		t.Errorf("Location %q events_url %q, want %q", got, sr.EventsURL, want)
	}
	if p := env.runs.prepared[0]; p.RepoDir != "/srv/repo" || p.Prompt != "greet the world" || p.SessionID != sr.SessionID {
		t.Errorf("Prepare got %+v", p)
	}
	s := env.openStream(t, sr.SessionID, 0, "")
	var types []string
	var last int64
	for {
		f, ok := s.next(t)
		if !ok {
			break
		}
		if f.id != last+1 {
			t.Fatalf("id %d after %d", f.id, last)
		}
		last = f.id
		var e event.Event
		if err := json.Unmarshal([]byte(f.data), &e); err != nil || e.Seq != f.id || e.Type != f.typ || e.SessionID != sr.SessionID {
			t.Fatalf("data %s does not match frame %d %s: %v", f.data, f.id, f.typ, err)
		}
		types = append(types, f.typ)
	}
	want := []string{event.SessionStart, event.RunStarted, event.OutputDelta, event.RunCompleted, event.TurnTerminal, event.SessionClose}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("stream %v, want %v", types, want)
	}
	r = env.do(t, http.MethodGet, "/v1/runs/"+sr.SessionID, "", "")
	var snap replay.Snapshot
	if err := json.Unmarshal(r.body, &snap); err != nil || r.status != http.StatusOK {
		t.Fatalf("snapshot %d %s", r.status, r.body)
	}
	if snap.RunStatus != "completed" || !snap.Closed || snap.Prompt != "greet the world" || snap.LastSeq != 6 {
		t.Errorf("snapshot %+v", snap)
	}
	waitFor(t, "the run to be closed", func() bool { _, closed, _ := env.runs.counts(); return closed == 1 })
}

func TestSnapshotUnknownSession(t *testing.T) {
	env := newTestEnv(t, Options{})
	for _, path := range []string{"/v1/runs/nope", "/v1/runs/nope/events", "/v1/runs/a..b", "/v1/runs/a..b/events"} {
		r := env.do(t, http.MethodGet, path, "", "")
		if r.status != http.StatusNotFound || r.errorCode() != "unknown_session" {
			t.Errorf("%s: got %d %s, want 404 unknown_session", path, r.status, r.body)
		}
	}
}

// TestEventsResumeNoGapNoDuplicate appends events concurrently while a
// client reads a few, drops the connection, and resumes from the last id it
// saw (alternately through Last-Event-ID and ?after=): the client must see
// every event exactly once, in order, and the stream must end at the end.
func TestEventsResumeNoGapNoDuplicate(t *testing.T) {
	env := newTestEnv(t, Options{})
	const sid, total = "busy", 300
	mustAppend(t, env.store, sid, startDrafts("r1", "stream")...)
	writerDone := make(chan error, 1)
	go func() {
		ctx := context.Background()
		for i := 0; i < total; i++ {
			if err := appendDrafts(ctx, env.store, sid, deltaDraft("r1", i)); err != nil {
				writerDone <- err
				return
			}
		}
		writerDone <- appendDrafts(ctx, env.store, sid, endDrafts("r1")...)
	}()

	var seen []int64
	var last int64
	for conn := 0; ; conn++ {
		var s *stream
		if conn%2 == 0 {
			s = env.openStream(t, sid, last, "")
		} else {
			s = env.openStream(t, sid, 0, fmt.Sprintf("?after=%d", last))
		}
		if s.resp.StatusCode == http.StatusNoContent {
			break
		}
		if s.resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: status %d", conn, s.resp.StatusCode)
		}
		ended := true
		for i := 0; i < 17; i++ { // read a few, then drop the connection
			f, ok := s.next(t)
			if !ok {
				break
			}
			seen = append(seen, f.id)
			last = f.id
			ended = false
		}
		s.close()
		if ended {
			t.Fatalf("connection %d ended without an event and without 204", conn)
		}
	}
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	want := int64(2 + total + 3)
	if int64(len(seen)) != want {
		t.Fatalf("saw %d events, want %d", len(seen), want)
	}
	for i, id := range seen {
		if id != int64(i+1) {
			t.Fatalf("event %d has id %d: gap or duplicate", i+1, id)
		}
	}
	waitFor(t, "streams to close", func() bool { return env.api.openStreams.Load() == 0 })
}

func TestEventsKeepAlive(t *testing.T) {
	env := newTestEnv(t, Options{KeepAlive: 5 * time.Millisecond})
	mustAppend(t, env.store, "idle", startDrafts("r1", "wait")...)
	s := env.openStream(t, "idle", 0, "")
	comments, events := 0, 0
	for comments < 3 {
		select {
		case f, ok := <-s.frames:
			if !ok {
				t.Fatal("stream ended")
			}
			if f.comment == "keep-alive" {
				comments++
			} else if f.typ != "" {
				events++
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no keep-alive within 10s")
		}
	}
	if events != 2 {
		t.Errorf("saw %d events, want 2", events)
	}
}

func TestEventsCloseAtTerminal(t *testing.T) {
	env := newTestEnv(t, Options{})
	// A paused run: the stream stays open through run.paused and carries
	// the resumed run to its end.
	mustAppend(t, env.store, "s1", append(startDrafts("r1", "p"), pauseDrafts("r1", "ap-1")...)...)
	s := env.openStream(t, "s1", 0, "")
	for i := 0; i < 4; i++ {
		if _, ok := s.next(t); !ok {
			t.Fatal("stream ended early")
		}
	}
	mustAppend(t, env.store, "s1", event.Draft{RunID: "r1", Type: event.RunResumed, Actor: "runtime", Payload: map[string]any{"reason": "approved"}})
	mustAppend(t, env.store, "s1", endDrafts("r1")...)
	var types []string
	for {
		f, ok := s.next(t)
		if !ok {
			break
		}
		types = append(types, f.typ)
	}
	if want := "run.resumed,run.completed,turn.terminal,session.close"; strings.Join(types, ",") != want {
		t.Errorf("after the pause: %v, want %s", types, want)
	}

	// Reading a finished session from the start ends by itself.
	s = env.openStream(t, "s1", 0, "")
	n := 0
	for {
		if _, ok := s.next(t); !ok {
			break
		}
		n++
	}
	if n != 8 {
		t.Errorf("replayed %d events, want 8", n)
	}
	// Resuming after the end: 204, so EventSource stops reconnecting.
	if s := env.openStream(t, "s1", 8, ""); s.resp.StatusCode != http.StatusNoContent {
		t.Errorf("after the last event: %d, want 204", s.resp.StatusCode)
	}
	// A second run of the session: the first run's session.close is not
	// the end.
	mustAppend(t, env.store, "s1", append(startDrafts("r2", "again"), endDrafts("r2")...)...)
	s = env.openStream(t, "s1", 5, "")
	n = 0
	for {
		if _, ok := s.next(t); !ok {
			break
		}
		n++
	}
	if n != 8 {
		t.Errorf("from after event 5: %d events, want 8 (3 of run 1, 5 of run 2)", n)
	}
}

// TestEventsEndWhenTheRunReturns: session.close is written before the run
// that wrote it returns (it still exports the log and closes); the stream
// ends once it has, and a client resuming in between is not left hanging.
func TestEventsEndWhenTheRunReturns(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken, KeepAlive: time.Hour})
	env.runs.afterEnd = make(chan struct{})
	if r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, `{"session_id": "s1", "repo_dir": "/r", "prompt": "p"}`); r.status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	s := env.openStream(t, "s1", 0, "")
	for i := 1; i <= 6; i++ {
		if f, ok := s.next(t); !ok || f.id != int64(i) {
			t.Fatalf("event %d: %+v %v", i, f, ok)
		}
	}
	resumed := env.openStream(t, "s1", 6, "") // after session.close, run still returning
	if resumed.resp.StatusCode != http.StatusOK {
		t.Fatalf("resume after session.close while the run returns: %d, want 200", resumed.resp.StatusCode)
	}
	close(env.runs.afterEnd)
	if f, ok := s.next(t); ok {
		t.Errorf("stream went on with %+v", f)
	}
	if f, ok := resumed.next(t); ok {
		t.Errorf("resumed stream went on with %+v", f)
	}
	if s := env.openStream(t, "s1", 6, ""); s.resp.StatusCode != http.StatusNoContent {
		t.Errorf("after the run returned: %d, want 204", s.resp.StatusCode)
	}
}

func TestEventsBadLastEventID(t *testing.T) {
	env := newTestEnv(t, Options{})
	mustAppend(t, env.store, "s1", startDrafts("r1", "p")...)
	for _, tc := range []struct {
		name, query string
		last        int64
	}{
		{"not a number", "?after=abc", 0},
		{"negative", "?after=-1", 0},
		{"beyond the log", "", 99},
	} {
		s := env.openStream(t, "s1", tc.last, tc.query)
		if s.resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: got %d, want 400", tc.name, s.resp.StatusCode)
		}
	}
}

func TestEventsClientDisconnectEndsStream(t *testing.T) {
	env := newTestEnv(t, Options{KeepAlive: time.Hour})
	mustAppend(t, env.store, "s1", startDrafts("r1", "p")...)
	s := env.openStream(t, "s1", 0, "")
	if _, ok := s.next(t); !ok {
		t.Fatal("no event")
	}
	if got := env.api.openStreams.Load(); got != 1 {
		t.Fatalf("%d open streams, want 1", got)
	}
	s.close()
	waitFor(t, "the handler to return after the client left", func() bool { return env.api.openStreams.Load() == 0 })
	if !hasLine(env.scrape(t), "agentos_event_streams 0") {
		t.Error("agentos_event_streams is not back to 0")
	}
}

// silentStore never notifies watchers, like appends made by another
// process.
type silentStore struct{ store.Store }

func (silentStore) Watch(string) (<-chan struct{}, func()) { return make(chan struct{}), func() {} }

func TestEventsPollCatchesOtherWriters(t *testing.T) {
	mem := store.NewMemory(newSealer(t))
	env := newTestEnv(t, Options{Store: silentStore{mem}, Poll: time.Millisecond})
	mustAppend(t, mem, "s1", startDrafts("r1", "p")...)
	s := env.openStream(t, "s1", 0, "")
	for i := 0; i < 2; i++ {
		s.next(t)
	}
	mustAppend(t, mem, "s1", endDrafts("r1")...)
	for i := 0; i < 3; i++ {
		if _, ok := s.next(t); !ok {
			t.Fatalf("event %d of another writer never arrived", i+3)
		}
	}
	if _, ok := s.next(t); ok {
		t.Error("stream did not end after session.close")
	}
}

func TestApprovals(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken})
	mustAppend(t, env.store, "s1", append(startDrafts("run-s1", "p"), pauseDrafts("run-s1", "ap-1")...)...)
	mustAppend(t, env.store, "done", append(startDrafts("r0", "p"), append(pauseDrafts("r0", "ap-0"),
		event.Draft{RunID: "r0", Type: event.ApprovalResolved, Actor: "maintainer", Payload: map[string]any{"approval_id": "ap-0", "decision": "deny", "by": "octocat"}})...)...)
	auth := "Bearer " + testToken
	cases := []struct {
		name, id, body string
		status         int
		code           string
	}{
		{"bad decision", "ap-1", `{"session_id": "s1", "decision": "maybe", "by": "octocat"}`, 400, "bad_request"},
		{"no by", "ap-1", `{"session_id": "s1", "decision": "approve"}`, 400, "bad_request"},
		{"no session", "ap-1", `{"decision": "approve", "by": "octocat"}`, 400, "bad_request"},
		{"unknown field", "ap-1", `{"session_id": "s1", "decision": "approve", "by": "o", "force": true}`, 400, "bad_request"},
		{"not json", "ap-1", `approve`, 400, "bad_request"},
		{"unknown session", "ap-1", `{"session_id": "nope", "decision": "approve", "by": "octocat"}`, 404, "unknown_session"},
		{"unknown approval", "ap-9", `{"session_id": "s1", "decision": "approve", "by": "octocat"}`, 404, "unknown_approval"},
		{"already resolved", "ap-0", `{"session_id": "done", "decision": "approve", "by": "octocat"}`, 409, "already_resolved"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := env.do(t, http.MethodPost, "/v1/approvals/"+tc.id, auth, tc.body)
			if r.status != tc.status || r.errorCode() != tc.code {
				t.Errorf("got %d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
		})
	}

	s := env.openStream(t, "s1", 4, "")
	r := env.do(t, http.MethodPost, "/v1/approvals/ap-1", auth, `{"session_id": "s1", "decision": "approve", "by": "octocat", "reason": "looks right"}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	var types []string
	for {
		f, ok := s.next(t)
		if !ok {
			break
		}
		types = append(types, f.typ)
	}
	if want := "approval.resolved,run.resumed,run.completed,turn.terminal,session.close"; strings.Join(types, ",") != want {
		t.Errorf("after the answer: %v, want %s", types, want)
	}
	// Answering again: 409.
	if r := env.do(t, http.MethodPost, "/v1/approvals/ap-1", auth, `{"session_id": "s1", "decision": "deny", "by": "octocat"}`); r.status != http.StatusConflict {
		t.Errorf("second answer: %d %s, want 409", r.status, r.body)
	}
	if m := env.scrape(t); !hasLine(m, "agentos_approval_latency_seconds_count 1") {
		t.Errorf("approval latency not observed once:\n%s", grep(m, "approval"))
	}
}

// TestApprovalRightAfterPause answers as soon as run.paused is on the
// stream, while the run that paused is still returning: the answer waits
// for it instead of failing with 409.
func TestApprovalRightAfterPause(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken})
	env.runs.pause = true
	env.runs.afterPause = make(chan struct{})
	if r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, `{"session_id": "s1", "repo_dir": "/r", "prompt": "p"}`); r.status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	s := env.openStream(t, "s1", 0, "")
	for {
		f, ok := s.next(t)
		if !ok {
			t.Fatal("stream ended before run.paused")
		}
		if f.typ == event.RunPaused {
			break
		}
	}
	answered := make(chan response, 1)
	go func() {
		answered <- env.do(t, http.MethodPost, "/v1/approvals/ap-1", "Bearer "+testToken, `{"session_id": "s1", "decision": "approve", "by": "octocat"}`)
	}()
	close(env.runs.afterPause)
	if r := <-answered; r.status != http.StatusAccepted {
		t.Fatalf("answer right after the pause: %d %s", r.status, r.body)
	}
	var last string
	for {
		f, ok := s.next(t)
		if !ok {
			break
		}
		last = f.typ
	}
	if last != event.SessionClose {
		t.Errorf("stream ended at %s", last)
	}
}

func TestApprovalWhileRunActiveIs409(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken})
	env.runs.hold = make(chan struct{})
	mustAppend(t, env.store, "s1", append(startDrafts("r1", "p"), pauseDrafts("r1", "ap-1")...)...)
	// A new run of the session is executing (held).
	if r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, `{"session_id": "s1", "prompt": "more"}`); r.status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.status, r.body)
	}
	<-env.runs.started
	r := env.do(t, http.MethodPost, "/v1/approvals/ap-1", "Bearer "+testToken, `{"session_id": "s1", "decision": "approve", "by": "octocat"}`)
	if r.status != http.StatusConflict || r.errorCode() != "run_active" {
		t.Errorf("got %d %s, want 409 run_active", r.status, r.body)
	}
	if r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, `{"session_id": "s1", "prompt": "more"}`); r.status != http.StatusConflict {
		t.Errorf("second run of a busy session: %d, want 409", r.status)
	}
	close(env.runs.hold)
}

func TestReadyz(t *testing.T) {
	st, err := sqlite.Open(t.TempDir(), newSealer(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env := newTestEnv(t, Options{Store: st, Token: testToken})
	if r := env.do(t, http.MethodGet, "/readyz", "-", ""); r.status != http.StatusOK || string(r.body) != "ready" {
		t.Fatalf("open store: %d %s", r.status, r.body)
	}
	if r := env.do(t, http.MethodGet, "/healthz", "", ""); r.status != http.StatusOK {
		t.Fatalf("healthz: %d", r.status)
	}
	st.Close()
	// Without the API token: the status, one word, no reason.
	for _, auth := range []string{"-", "Bearer wrong-token-0123456789", "Bearer " + testToken + "x"} {
		r := env.do(t, http.MethodGet, "/readyz", auth, "")
		if r.status != http.StatusServiceUnavailable || string(r.body) != "unavailable" {
			t.Errorf("closed store, Authorization %q: %d %s, want 503 unavailable and nothing else", auth, r.status, r.body)
		}
	}
	r := env.do(t, http.MethodGet, "/readyz", "Bearer "+testToken, "")
	if r.status != http.StatusServiceUnavailable || r.errorCode() != "not_ready" || !strings.Contains(string(r.body), "closed") {
		t.Errorf("closed store, with the API token: %d %s, want 503 not_ready naming the reason", r.status, r.body)
	}
	if r := env.do(t, http.MethodGet, "/healthz", "", ""); r.status != http.StatusOK {
		t.Errorf("healthz must not depend on the store: %d", r.status)
	}
}

// TestReadyzShowsSandbox: /readyz carries how commands are confined, to
// the holder of the API token only.
func TestReadyzShowsSandbox(t *testing.T) {
	st, err := sqlite.Open(t.TempDir(), newSealer(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep := sandbox.Disabled().Report()
	env := newTestEnv(t, Options{Store: st, Sandbox: rep, Token: testToken})
	for _, auth := range []string{"-", "Bearer not-the-token-0123456789", "Basic " + testToken} {
		r := env.do(t, http.MethodGet, "/readyz", auth, "")
		if r.status != http.StatusOK || string(r.body) != "ready" {
			t.Errorf("Authorization %q: %d %q, want 200 \"ready\" and no details", auth, r.status, r.body)
		}
	}
	r := env.do(t, http.MethodGet, "/readyz", "Bearer "+testToken, "")
	var body struct {
		Status  string         `json:"status"`
		Sandbox sandbox.Report `json:"sandbox"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || r.status != http.StatusOK {
		t.Fatalf("readyz: %d %s %v", r.status, r.body, err)
	}
	if body.Status != "ready" || body.Sandbox.Mechanism != sandbox.None || !body.Sandbox.Ready || body.Sandbox.Warning == "" {
		t.Errorf("readyz sandbox = %+v, want mechanism none with its warning", body.Sandbox)
	}
}

// TestReadyzWithoutAPIToken: a server with no API token shows no one the
// details.
func TestReadyzWithoutAPIToken(t *testing.T) {
	env := newTestEnv(t, Options{Sandbox: sandbox.Disabled().Report()})
	for _, auth := range []string{"-", "Bearer ", "Bearer operator-read-token"} {
		r := env.do(t, http.MethodGet, "/readyz", auth, "")
		if r.status != http.StatusOK || string(r.body) != "ready" {
			t.Errorf("Authorization %q: %d %q, want 200 \"ready\"", auth, r.status, r.body)
		}
	}
}

func TestMetricsExposition(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken})
	m := env.api.Metrics()
	m.Delivery("issue_comment", "accepted")
	m.Delivery("issue_comment", "accepted")
	m.Delivery("push", "ignored")
	m.SetQueueDepth(func() float64 { return 7 })
	r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, `{"session_id": "m1", "repo_dir": "/r", "prompt": "x"}`)
	if r.status != http.StatusAccepted {
		t.Fatal(r.status)
	}
	waitFor(t, "the run to finish", func() bool {
		return hasLine(env.scrape(t), `agentos_run_outcomes_total{status="completed"} 1`)
	})
	out := env.scrape(t)
	for _, want := range []string{
		`agentos_webhook_deliveries_total{event="issue_comment",outcome="accepted"} 2`,
		`agentos_webhook_deliveries_total{event="push",outcome="ignored"} 1`,
		`agentos_queue_depth 7`,
		`agentos_runs{state="queued"} 0`,
		`agentos_runs{state="running"} 0`,
		`agentos_approval_latency_seconds_count 0`,
		`agentos_approval_latency_seconds_bucket{le="+Inf"} 0`,
		`agentos_event_streams 0`,
	} {
		if !hasLine(out, want) {
			t.Errorf("exposition lacks %s", want)
		}
	}
	if !strings.Contains(out, "go_goroutines ") || !strings.Contains(out, "# TYPE agentos_approval_latency_seconds histogram") {
		t.Error("exposition lacks the Go collector or the histogram type")
	}
}

func TestMetricsAreNotGlobal(t *testing.T) {
	a, b := NewMetrics(), NewMetrics() // would panic on a shared registry
	a.Delivery("push", "accepted")
	if a.Registry() == b.Registry() {
		t.Fatal("two Metrics share a registry")
	}
}

func TestRunsAreBounded(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken, MaxRuns: 1, MaxQueued: 2})
	env.runs.hold = make(chan struct{})
	start := func(sid string) response {
		return env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, jsonBody(StartRequest{SessionID: sid, RepoDir: "/r", Prompt: "x"}))
	}
	if r := start("a"); r.status != http.StatusAccepted {
		t.Fatal(r.status)
	}
	if got := <-env.runs.started; got != "a" {
		t.Fatalf("started %s", got)
	}
	if r := start("b"); r.status != http.StatusAccepted {
		t.Fatal(r.status)
	}
	// b waits for the only slot: its snapshot says queued.
	r := env.do(t, http.MethodGet, "/v1/runs/b", "", "")
	var snap replay.Snapshot
	if json.Unmarshal(r.body, &snap); r.status != http.StatusOK || snap.RunStatus != StateQueued {
		t.Errorf("queued run's snapshot: %d %s", r.status, r.body)
	}
	if r := start("c"); r.status != http.StatusAccepted {
		t.Fatal(r.status)
	}
	if r := start("d"); r.status != http.StatusTooManyRequests || r.errorCode() != "queue_full" || r.header.Get("Retry-After") == "" {
		t.Errorf("over the queue: %d %s, want 429 queue_full with Retry-After", r.status, r.body)
	}
	if m := env.scrape(t); !hasLine(m, `agentos_runs{state="running"} 1`) || !hasLine(m, `agentos_runs{state="queued"} 2`) {
		t.Errorf("run gauges:\n%s", grep(m, "agentos_runs{"))
	}
	close(env.runs.hold)
	// Both queued runs start once slots free up (each waits in its own
	// goroutine, so their order is the scheduler's).
	got := map[string]bool{<-env.runs.started: true, <-env.runs.started: true}
	if !got["b"] || !got["c"] {
		t.Errorf("started %v, want b and c", got)
	}
	waitFor(t, "all runs closed", func() bool { _, closed, _ := env.runs.counts(); return closed == 3 })
}

func TestShutdownCancelsRunsAndDropsQueued(t *testing.T) {
	env := newTestEnv(t, Options{Token: testToken, MaxRuns: 1, Grace: time.Millisecond})
	env.runs.hold = make(chan struct{}) // never released: only cancellation ends the run
	for _, sid := range []string{"running", "queued"} {
		if r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, jsonBody(StartRequest{SessionID: sid, RepoDir: "/r", Prompt: "x"})); r.status != http.StatusAccepted {
			t.Fatal(r.status)
		}
	}
	<-env.runs.started
	env.stop() // returns only when every run goroutine has
	executed, closed, cancelled := env.runs.counts()
	if executed != 1 || cancelled != 1 || closed != 2 {
		t.Errorf("executed %d cancelled %d closed %d; want 1 1 2 (the queued run closed without executing)", executed, cancelled, closed)
	}
	r := env.do(t, http.MethodPost, "/v1/runs", "Bearer "+testToken, jsonBody(StartRequest{SessionID: "late", RepoDir: "/r", Prompt: "x"}))
	if r.status != http.StatusServiceUnavailable || r.errorCode() != "shutting_down" {
		t.Errorf("after stop: %d %s, want 503 shutting_down", r.status, r.body)
	}
}

func TestEndStreamsClosesOpenStreams(t *testing.T) {
	env := newTestEnv(t, Options{KeepAlive: time.Hour})
	mustAppend(t, env.store, "s1", startDrafts("r1", "p")...)
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		s := env.openStream(t, "s1", 0, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range s.frames {
			}
		}()
	}
	waitFor(t, "three streams", func() bool { return env.api.openStreams.Load() == 3 })
	env.api.EndStreams()
	wg.Wait() // every body reached EOF
	if s := env.openStream(t, "s1", 0, ""); s.resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("stream after EndStreams: %d, want 503", s.resp.StatusCode)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
