package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestHandler(t *testing.T) {
	comment := []byte(`{"action":"created","sender":{"login":"octocat"}}`)
	deleted := []byte(`{"action":"deleted"}`)
	form := []byte("payload=" + url.QueryEscape(string(comment)))
	big := []byte(`{"action":"created","pad":"` + strings.Repeat("x", 2000) + `"}`)
	cases := []struct {
		name       string
		req        request
		chunked    bool // no Content-Length: the bounded read must catch it
		wantStatus int
		wantBody   string // substring of the JSON answer
		wantStored string // action stored, "-" for not stored
		wantObs    string
	}{
		{"accepted", signed("issue_comment", "d-accepted", comment), false, 202, `{"accepted":true}`, "created", "issue_comment accepted"},
		{"other action accepted", signed("issue_comment", "d-deleted", deleted), false, 202, `{"accepted":true}`, "deleted", "issue_comment accepted"},
		{"no action accepted", signed("installation_repositories", "d-noaction", []byte(`{}`)), false, 202, `{"accepted":true}`, "", "installation_repositories accepted"},
		{"form body", request{event: "pull_request", id: "d-form", body: form, sig: Sign(testSecret, form), contentType: "application/x-www-form-urlencoded"}, false, 202, `{"accepted":true}`, "created", "pull_request accepted"},
		{"missing signature", request{event: "issue_comment", id: "d-nosig", body: comment}, false, 401, "missing X-Hub-Signature-256", "-", "issue_comment unauthorized"},
		{"wrong signature", request{event: "issue_comment", id: "d-wrong", body: comment, sig: Sign([]byte("other"), comment)}, false, 401, "does not match", "-", "issue_comment unauthorized"},
		{"sha1 signature", request{event: "issue_comment", id: "d-sha1", body: comment, sig: "sha1=0123456789012345678901234567890123456789"}, false, 401, "malformed", "-", "issue_comment unauthorized"},
		{"unsigned garbage is 401 not 400", request{event: "issue_comment", id: "d-garbage", body: []byte("{not json")}, false, 401, "missing", "-", "issue_comment unauthorized"},
		{"too large by header", signed("issue_comment", "d-big", big), false, 413, "larger than 1024 bytes", "-", "issue_comment too_large"},
		{"too large chunked", signed("issue_comment", "d-bigchunk", big), true, 413, "larger than 1024 bytes", "-", "issue_comment too_large"},
		{"small chunked accepted", signed("issue_comment", "d-chunk", comment), true, 202, `{"accepted":true}`, "created", "issue_comment accepted"},
		{"missing delivery id", signed("issue_comment", "", comment), false, 400, "X-GitHub-Delivery", "-", "issue_comment bad_request"},
		{"delivery id with space", signed("issue_comment", "a b", comment), false, 400, "X-GitHub-Delivery", "-", "issue_comment bad_request"},
		{"delivery id too long", signed("issue_comment", strings.Repeat("a", 129), comment), false, 400, "X-GitHub-Delivery", "-", "issue_comment bad_request"},
		{"missing event", signed("", "d-noevent", comment), false, 400, "missing X-GitHub-Event", "-", "other bad_request"},
		{"unsupported event", signed("issues", "d-issues", comment), false, 400, `"error":"unsupported event","event":"issues"`, "-", "other unsupported"},
		{"ping", signed("ping", "d-ping", []byte(`{"zen":"Keep it logically awesome."}`)), false, 200, `{"ping":true}`, "-", "ping ping"},
		{"malformed JSON", signed("issue_comment", "d-malformed", []byte(`{"action":`)), false, 400, "malformed JSON", "-", "issue_comment bad_request"},
		{"JSON array", signed("issue_comment", "d-array", []byte(`[1,2]`)), false, 400, "not a JSON object", "-", "issue_comment bad_request"},
		{"JSON null", signed("issue_comment", "d-null", []byte(`null`)), false, 400, "not a JSON object", "-", "issue_comment bad_request"},
		{"empty body", signed("issue_comment", "d-empty", nil), false, 400, "not a JSON object", "-", "issue_comment bad_request"},
		{"action not a string", signed("pull_request", "d-numaction", []byte(`{"action":5}`)), false, 400, "malformed JSON", "-", "pull_request bad_request"},
		{"form without payload", request{event: "pull_request", id: "d-form2", body: []byte("x=1"), sig: Sign(testSecret, []byte("x=1")), contentType: "application/x-www-form-urlencoded"}, false, 400, `without \"payload\"`, "-", "pull_request bad_request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := openTestQueue(t)
			obs := &recorder{}
			h := NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}, MaxBody: 1024}, q, obs)
			req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(tc.req.body))
			if tc.chunked {
				req.ContentLength = -1
			}
			ct := tc.req.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
			for k, v := range map[string]string{EventHeader: tc.req.event, DeliveryHeader: tc.req.id, SignatureHeader: tc.req.sig} {
				if v != "" {
					req.Header.Set(k, v)
				}
			}
			w := httptest.NewRecorder()
			newEngine(h).ServeHTTP(w, req)
			if w.Code != tc.wantStatus || !strings.Contains(w.Body.String(), tc.wantBody) {
				t.Errorf("got %d %s, want %d with %s", w.Code, w.Body, tc.wantStatus, tc.wantBody)
			}
			if !json.Valid(w.Body.Bytes()) || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
				t.Errorf("answer is not JSON: %q (%s)", w.Body, w.Header().Get("Content-Type"))
			}
			if got := obs.list(); !reflect.DeepEqual(got, []string{tc.wantObs}) {
				t.Errorf("observer got %q, want %q", got, tc.wantObs)
			}
			rec, ok, err := q.Get(context.Background(), tc.req.id)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantStored == "-" && ok:
				t.Errorf("delivery stored: %+v", rec)
			case tc.wantStored != "-" && !ok:
				t.Errorf("delivery not stored")
			case ok:
				if rec.Action != tc.wantStored || rec.Event != tc.req.event || rec.State != "pending" || !json.Valid(rec.Body) {
					t.Errorf("stored %s/%s state %s body %q, want %s/%s pending JSON", rec.Event, rec.Action, rec.State, rec.Body, tc.req.event, tc.wantStored)
				}
			}
		})
	}
}

func TestHandlerDuplicate(t *testing.T) {
	q, _ := openTestQueue(t)
	obs := &recorder{}
	e := newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, obs))
	body := []byte(`{"action":"created"}`)
	for i, want := range []int{202, 200, 200} {
		w := post(t, e, signed("issue_comment", "72d3162e-cc78-11e3-81ab-4c9367dc0958", body))
		if w.Code != want {
			t.Fatalf("delivery %d: got %d %s, want %d", i, w.Code, w.Body, want)
		}
		if i > 0 && w.Body.String() != `{"duplicate":true}` {
			t.Errorf("delivery %d: body %s", i, w.Body)
		}
	}
	// A redelivery whose body differs is still the same delivery.
	if w := post(t, e, signed("issue_comment", "72d3162e-cc78-11e3-81ab-4c9367dc0958", []byte(`{"action":"edited"}`))); w.Code != 200 {
		t.Errorf("changed redelivery: got %d", w.Code)
	}
	if n, err := q.Depth(context.Background()); err != nil || n != 1 {
		t.Errorf("Depth = %d, %v; want 1", n, err)
	}
	want := []string{"issue_comment accepted", "issue_comment duplicate", "issue_comment duplicate", "issue_comment duplicate"}
	if got := obs.list(); !reflect.DeepEqual(got, want) {
		t.Errorf("observer %q, want %q", got, want)
	}
}

func TestHandlerSecretRotation(t *testing.T) {
	q, _ := openTestQueue(t)
	old := []byte("old")
	e := newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret, old}}, q, nil))
	body := []byte(`{"action":"created"}`)
	r := signed("issue_comment", "d-new", body)
	if w := post(t, e, r); w.Code != 202 {
		t.Errorf("current secret: %d", w.Code)
	}
	r = request{event: "issue_comment", id: "d-old", body: body, sig: Sign(old, body)}
	if w := post(t, e, r); w.Code != 202 {
		t.Errorf("previous secret: %d", w.Code)
	}
	r = request{event: "issue_comment", id: "d-other", body: body, sig: Sign([]byte("older"), body)}
	if w := post(t, e, r); w.Code != 401 {
		t.Errorf("retired secret: %d", w.Code)
	}
}

func TestHandlerNoSecretFailsClosed(t *testing.T) {
	q, _ := openTestQueue(t)
	e := newEngine(NewHandler(Config{Events: testEvents}, q, nil))
	body := []byte(`{"action":"created"}`)
	if w := post(t, e, request{event: "issue_comment", id: "d", body: body, sig: Sign(nil, body)}); w.Code != 401 {
		t.Errorf("no secret configured: got %d, want 401", w.Code)
	}
}

func TestHandlerStoreFailureIs503(t *testing.T) {
	q, _ := openTestQueue(t)
	obs := &recorder{}
	e := newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, obs))
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	w := post(t, e, signed("issue_comment", "d-closed", []byte(`{"action":"created"}`)))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "could not store") {
		t.Errorf("got %d %s, want 503", w.Code, w.Body)
	}
	if got := obs.list(); !reflect.DeepEqual(got, []string{"issue_comment unavailable"}) {
		t.Errorf("observer %q", got)
	}
}

func TestHandlerDuplicateAcrossRestart(t *testing.T) {
	q, path := openTestQueue(t)
	body := []byte(`{"action":"created"}`)
	r := signed("issue_comment", "d-restart", body)
	if w := post(t, newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil)), r); w.Code != 202 {
		t.Fatalf("first: %d", w.Code)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q2 := openQueueAt(t, path)
	w := post(t, newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q2, nil)), r)
	if w.Code != 200 || w.Body.String() != `{"duplicate":true}` {
		t.Errorf("after restart: %d %s, want 200 duplicate", w.Code, w.Body)
	}
	if n, _ := q2.Depth(context.Background()); n != 1 {
		t.Errorf("Depth = %d, want 1", n)
	}
}

// TestHandlerReusesBodyBuffers: the handler reuses body buffers across
// deliveries, concurrent ones included; every queue keeps what it was
// given intact.
func TestHandlerReusesBodyBuffers(t *testing.T) {
	q, _ := openTestQueue(t)
	e := newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))
	const n = 64
	bodyOf := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"action":"created","i":%d,"pad":%q}`, i, strings.Repeat(string(rune('a'+i%26)), 100+i*37)))
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w := post(t, e, signed("issue_comment", fmt.Sprintf("d-%d", i), bodyOf(i))); w.Code != http.StatusAccepted {
				t.Errorf("delivery %d: %d %s", i, w.Code, w.Body)
			}
		}()
	}
	wg.Wait()
	for i := range n {
		rec, ok, err := q.Get(context.Background(), fmt.Sprintf("d-%d", i))
		if err != nil || !ok {
			t.Fatalf("d-%d: %v %v", i, ok, err)
		}
		if !bytes.Equal(rec.Body, bodyOf(i)) {
			t.Errorf("d-%d: stored body %q, want %q", i, rec.Body, bodyOf(i))
		}
	}
}
