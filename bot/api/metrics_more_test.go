package api

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"
)

// gathered is the registry's samples as "name{k=v,...}" → value.
func gathered(t *testing.T, m *Metrics) (map[string]float64, map[string]map[string]bool) {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]float64{}
	labels := map[string]map[string]bool{}
	for _, f := range fams {
		labels[f.GetName()] = map[string]bool{}
		for _, s := range f.GetMetric() {
			var kv []string
			for _, l := range s.GetLabel() {
				kv = append(kv, l.GetName()+"="+l.GetValue())
				labels[f.GetName()][l.GetName()] = true
			}
			vals[f.GetName()+"{"+strings.Join(kv, ",")+"}"] = value(s)
		}
	}
	return vals, labels
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return 0
}

func TestGitHubTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("X-RateLimit-Remaining", "4321")
			w.Header().Set("X-RateLimit-Resource", "core")
		case "/graphql":
			w.Header().Set("X-RateLimit-Remaining", "99")
			w.Header().Set("X-RateLimit-Resource", "graphql")
		case "/limited":
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.WriteHeader(http.StatusForbidden)
		case "/secondary":
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/forbidden":
			w.Header().Set("X-RateLimit-Remaining", "10")
			w.WriteHeader(http.StatusForbidden)
		default:
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	m := NewMetrics()
	hc := &http.Client{Transport: m.Transport(nil)}
	for _, c := range []struct{ method, path string }{{"GET", "/ok"}, {"POST", "/graphql"}, {"GET", "/limited"}, {"PATCH", "/secondary"}, {"GET", "/forbidden"}, {"GET", "/down"}, {"PROPFIND", "/ok"}} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest("GET", "http://127.0.0.1:1/unreachable", nil)
	if _, err := hc.Do(req); err == nil {
		t.Fatal("a closed port answered")
	}
	got, _ := gathered(t, m)
	for k, want := range map[string]float64{
		"agentos_github_requests_total{method=GET,status=2xx}":            1,
		"agentos_github_requests_total{method=POST,status=2xx}":           1,
		"agentos_github_requests_total{method=GET,status=rate_limited}":   1,
		"agentos_github_requests_total{method=PATCH,status=rate_limited}": 1,
		"agentos_github_requests_total{method=GET,status=4xx}":            1,
		"agentos_github_requests_total{method=GET,status=5xx}":            1,
		"agentos_github_requests_total{method=other,status=2xx}":          1,
		"agentos_github_requests_total{method=GET,status=error}":          1,
		"agentos_github_rate_limit_remaining{resource=core}":              4321, // the last answer of core
		"agentos_github_rate_limit_remaining{resource=graphql}":           99,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

func TestModelCallMetrics(t *testing.T) {
	m := NewMetrics()
	p := provider.Observed{P: fixedProvider{}, O: m}
	if _, err := p.Complete(context.Background(), provider.CompletionRequest{Model: "gpt-x"}); err != nil {
		t.Fatal(err)
	}
	m.ModelCall("openai", "gpt-x", time.Second, provider.Usage{}, &provider.Error{Code: provider.CodeProviderError, Status: 429})
	m.ModelCall("openai", "gpt-x", time.Second, provider.Usage{}, &provider.Error{Code: provider.CodeProviderError, Status: 500})
	m.ModelCall("openai", "gpt-x", time.Second, provider.Usage{}, context.Canceled)
	got, _ := gathered(t, m)
	for k, want := range map[string]float64{
		"agentos_model_requests_total{model=gpt-x,outcome=ok,provider=fixed}":            1,
		"agentos_model_requests_total{model=gpt-x,outcome=rate_limited,provider=openai}": 1,
		"agentos_model_requests_total{model=gpt-x,outcome=error,provider=openai}":        1,
		"agentos_model_requests_total{model=gpt-x,outcome=cancelled,provider=openai}":    1,
		"agentos_model_tokens_total{kind=input,model=gpt-x,provider=fixed}":              120,
		"agentos_model_tokens_total{kind=output,model=gpt-x,provider=fixed}":             30,
		"agentos_model_request_duration_seconds{provider=openai}":                        3,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
}

type fixedProvider struct{}

func (fixedProvider) Name() string { return "fixed" }
func (fixedProvider) Complete(context.Context, provider.CompletionRequest) (provider.CompletionResponse, error) {
	return provider.CompletionResponse{Text: "ok", Usage: provider.Usage{InputTokens: 120, OutputTokens: 30}}, nil
}

// TestStoreMetrics: what a real (memory) store appends is read for the
// run metrics, and its failures are counted by kind.
func TestStoreMetrics(t *testing.T) {
	m := NewMetrics()
	var logs bytes.Buffer
	s := m.Store(store.NewMemory(newSealer(t)), slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()
	rep := agentrun.Report{Status: agentrun.StatusFailed, Reason: "PROVIDER_ERROR: the model failed", NextAction: "retry", TraceID: "t", CorrelationID: "c", ErrorClass: agentrun.ClassProviderError, SchemaVersion: "v1"}
	drafts := []event.Draft{
		{RunID: "r1", Type: event.RunResumed, Actor: "runtime", Payload: map[string]any{"reason": "taken over: the process working the run stopped"}},
		{RunID: "r1", Type: event.RunResumed, Actor: "runtime", Payload: map[string]any{"reason": "approval answered"}},
		{RunID: "r1", Type: event.TurnTerminal, Actor: "runtime", Payload: rep},
	}
	evs, err := s.Append(ctx, "sess-1", 0, drafts...)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	// Appending after a stale sequence number is a conflict.
	if _, err := s.Append(ctx, "sess-1", 0, drafts[0]); err == nil {
		t.Fatal("a stale append succeeded")
	}
	got, _ := gathered(t, m)
	for k, want := range map[string]float64{
		"agentos_run_terminal_reports_total{class=provider_error,status=failed}": 1,
		"agentos_run_takeovers_total{}":                                          1,
		"agentos_store_errors_total{kind=conflict,op=append}":                    1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v (appended %d events)", k, got[k], want, len(evs))
		}
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "class=provider_error") || !strings.Contains(l, "session_id=sess-1") {
		t.Errorf("the failed run is not logged with its class: %s", l)
	}
	// A caller's own error from Scan is not the store's.
	mine := errors.New("enough")
	if err := s.Scan(ctx, "sess-1", 0, func(*event.Event) error { return mine }); !errors.Is(err, mine) {
		t.Fatalf("scan: %v", err)
	}
	if got, _ := gathered(t, m); got["agentos_store_errors_total{kind=error,op=scan}"] != 0 {
		t.Error("the caller's error counted as a store error")
	}
	// Labels stay bounded whatever the log holds.
	if boundClass("made_up") != "other" || boundStatus("weird") != "other" {
		t.Error("unknown values become labels")
	}
}

// TestAlertRulesNameRealMetrics: every agentos_* (and process_*) metric
// docs/alerts.yml names is one /metrics serves, and every label it
// selects on is one of that metric's.
func TestAlertRulesNameRealMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("docs/alerts.yml: %v", err)
	}
	// Touch every series so that Gather lists every metric.
	m := NewMetrics()
	m.ModelCall("p", "m", time.Second, provider.Usage{InputTokens: 1, OutputTokens: 1, CachedInputTokens: 1}, nil)
	m.ghCalls.WithLabelValues("GET", "2xx").Inc()
	m.ghRemaining.WithLabelValues("core").Set(1)
	m.storeErrs.WithLabelValues("append", "error").Inc()
	m.terminal.WithLabelValues("failed", "timeout").Inc()
	m.deliveries.WithLabelValues("issue_comment", "accepted").Inc()
	m.outcomes.WithLabelValues("completed").Inc()
	_, labels := gathered(t, m)

	metricRe := regexp.MustCompile(`\b((?:agentos|process)_[a-z0-9_]+)(\{[^}]*\})?`)
	labelRe := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	rules := 0
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			rules++
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %q: alert, expr, severity and summary are required", r.Alert)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("rule %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			names := metricRe.FindAllStringSubmatch(r.Expr, -1)
			if len(names) == 0 {
				t.Errorf("rule %s names no metric of agentos", r.Alert)
			}
			for _, n := range names {
				name := n[1]
				ls, ok := labels[name]
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if !ok && strings.HasSuffix(name, suffix) {
						ls, ok = labels[strings.TrimSuffix(name, suffix)]
					}
				}
				if !ok {
					t.Errorf("rule %s: no metric %s", r.Alert, name)
					continue
				}
				for _, l := range labelRe.FindAllStringSubmatch(n[2], -1) {
					if !ls[l[1]] && !(strings.HasPrefix(name, "process_") && l[1] == "job") && !(strings.HasSuffix(name, "_bucket") && l[1] == "le") {
						t.Errorf("rule %s: %s has no label %s", r.Alert, name, l[1])
					}
				}
			}
		}
	}
	if rules < 8 {
		t.Errorf("only %d rules", rules)
	}
}
