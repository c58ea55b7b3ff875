package main

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/tracing"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP trace endpoint that keeps what it receives.
type collector struct {
	mu    sync.Mutex
	spans map[string][]string // trace id → span names
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				id := hex.EncodeToString(sp.TraceId)
				c.spans[id] = append(c.spans[id], sp.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Write(out)
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a run's session.start names its
// trace and the collector receives the run's spans in that trace.
func TestServeExportsTraces(t *testing.T) {
	col := &collector{spans: map[string][]string{}}
	cs := httptest.NewServer(col)
	defer cs.Close()
	repo, env := demoSetup(t)
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = cs.URL
	s := startServe(t, env)
	code, body := httpDo(t, http.MethodPost, s.url+"/v1/runs", serveToken, `{"session_id": "traced-1", "repo_dir": "`+repo+`", "prompt": "`+demo.Prompt+`"}`, nil)
	if code != http.StatusAccepted {
		t.Fatalf("start: %d %s", code, body)
	}
	var snap struct {
		RunStatus string `json:"run_status"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for snap.RunStatus != "paused" {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not pause: %s", snap.RunStatus)
		}
		time.Sleep(200 * time.Millisecond)
		_, body := httpDo(t, http.MethodGet, s.url+"/v1/runs/traced-1", serveToken, "", nil)
		_ = json.Unmarshal(body, &snap)
	}
	_, body = httpDo(t, http.MethodGet, s.url+"/runs/traced-1", serveToken, "", nil)
	if err := s.stop(); err != nil { // flushes the spans
		t.Fatal(err)
	}
	evs, err := readStoreSession(t.Context(), s.data, "traced-1")
	if err != nil || len(evs) == 0 || evs[0].Type != event.SessionStart {
		t.Fatalf("session: %v %v", evs, err)
	}
	tid := event.FieldString(evs[0].Payload, "trace_id")
	if tid == "" || tid != tracing.TraceID(evs[0].RunID) {
		t.Fatalf("session.start trace_id = %q, want the run's %s", tid, tracing.TraceID(evs[0].RunID))
	}
	col.mu.Lock()
	names := col.spans[tid]
	col.mu.Unlock()
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	if !has["invoke_agent agentos"] || !has["execute_tool test.run"] || len(names) < 5 {
		t.Errorf("spans of trace %s: %v", tid, names)
	}
	if !strings.Contains(string(body), tid) {
		t.Errorf("the run page does not show the trace id %s", tid)
	}
}
