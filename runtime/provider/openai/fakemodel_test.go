package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/fakemodel"
	"github.com/agentos/agentos/runtime/provider/internal/exchange"
	"github.com/agentos/agentos/schemas"
)

// Tests of the adapter against the fake model server, which enforces what
// the OpenAI API enforces.

func fakeProfile(s *fakemodel.Server, key string) provider.Profile {
	p := provider.DefaultProfile()
	p.Provider, p.Model, p.BaseURL, p.APIKey = Name, s.Model(), s.URL(), key
	p.Origin = provider.Origin{Model: "AGENTOS_MODEL", BaseURL: "OPENAI_BASE_URL", APIKey: "OPENAI_API_KEY"}
	return p
}

func responseSchema(t *testing.T, id string) *provider.ResponseSchema {
	t.Helper()
	b, ok := schemas.MustDefault().Source(id)
	if !ok {
		t.Fatalf("no schema %s", id)
	}
	return &provider.ResponseSchema{Name: id, Schema: b}
}

var roleInputs = map[string][]provider.Message{
	"lead_directive_v1": {{Role: provider.RoleSystem, Content: "You are the Lead."}, {Role: provider.RoleUser, Content: "User request:\nfix the failing token check in auth.go"}},
	"plan_v1":           {{Role: provider.RoleSystem, Content: "You are the Planner."}, {Role: provider.RoleUser, Content: "lead_directive_v1:\n{\"intent\":\"Fix auth.go\"}"}},
	"worker_report_v1":  {{Role: provider.RoleSystem, Content: "You are the Worker."}, {Role: provider.RoleUser, Content: "plan_v1:\n{\"steps\":[{\"id\":\"s1\"}]}"}},
	"review_result_v1":  {{Role: provider.RoleSystem, Content: "You are the Reviewer."}, {Role: provider.RoleUser, Content: "plan_v1:\n{\"steps\":[{\"id\":\"s1\"}]}\nworker_report_v1:\n{\"output\":\"x\",\"steps_completed\":[\"s1\"]}"}},
}

// TestStructuredOutputHonoured: every role schema goes out as a strict
// json_schema the server accepts (it rejects schemas that break strict
// mode's rules), and the answer is the plain document.
func TestStructuredOutputHonoured(t *testing.T) {
	for _, stream := range []bool{false, true} {
		s := fakemodel.Start(t, fakemodel.Options{Key: "sk-good"})
		prov, _ := newProvider(t, fakeProfile(s, "sk-good"), stream)
		p := provider.Checked{P: prov, Reg: schemas.MustDefault()}
		for id, msgs := range roleInputs {
			resp, err := p.Complete(context.Background(), provider.CompletionRequest{Role: "x", Messages: msgs, Model: s.Model(), ResponseSchema: responseSchema(t, id)})
			if err != nil {
				t.Fatalf("%s stream=%v: %v", id, stream, err)
			}
			if err := schemas.MustDefault().ValidateJSON(id, []byte(resp.Text)); err != nil {
				t.Errorf("%s stream=%v: %v\n%s", id, stream, err, resp.Text)
			}
			var sent struct {
				ResponseFormat struct {
					Type       string `json:"type"`
					JSONSchema struct {
						Name   string `json:"name"`
						Strict bool   `json:"strict"`
					} `json:"json_schema"`
				} `json:"response_format"`
			}
			_ = json.Unmarshal(s.LastRequest(), &sent)
			if rf := sent.ResponseFormat; rf.Type != "json_schema" || rf.JSONSchema.Name != id || !rf.JSONSchema.Strict {
				t.Errorf("%s: response_format sent %+v", id, rf)
			}
		}
		if got := s.Stats().ResponseFormats; len(got) != 4 {
			t.Errorf("response formats seen %v", got)
		}
	}
}

// TestStructuredOutputIgnored: a server that ignores response_format may
// wrap the JSON; the adapter hands the text over as it came (the engine
// repairs it).
func TestStructuredOutputIgnored(t *testing.T) {
	s := fakemodel.Start(t, fakemodel.Options{IgnoreResponseFormat: true, Seed: 0})
	prov, _ := newProvider(t, fakeProfile(s, ""), false)
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: roleInputs["plan_v1"], ResponseSchema: responseSchema(t, "plan_v1")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Text, "```json\n{") {
		t.Errorf("text %q, want the server's fenced JSON unchanged", resp.Text)
	}
}

// TestSchemaWithToolsChoosesNone: a schema-bound answer in a conversation
// with tools keeps the tools (a stable prompt prefix) and sends
// tool_choice "none".
func TestSchemaWithToolsChoosesNone(t *testing.T) {
	s := fakemodel.Start(t, fakemodel.Options{})
	prov, _ := newProvider(t, fakeProfile(s, ""), false)
	resp, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: roleInputs["worker_report_v1"], Tools: tools, ResponseSchema: responseSchema(t, "worker_report_v1")})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 0 || schemas.MustDefault().ValidateJSON("worker_report_v1", []byte(resp.Text)) != nil {
		t.Errorf("resp = %+v", resp)
	}
	var sent map[string]any
	_ = json.Unmarshal(s.LastRequest(), &sent)
	if sent["tool_choice"] != "none" || len(sent["tools"].([]any)) != len(tools) {
		t.Errorf("tool_choice %v, %d tools", sent["tool_choice"], len(sent["tools"].([]any)))
	}
}

func TestCachedTokensAndToolCalls(t *testing.T) {
	for _, stream := range []bool{false, true} {
		s := fakemodel.Start(t, fakemodel.Options{})
		prov, _ := newProvider(t, fakeProfile(s, ""), stream)
		long := []provider.Message{{Role: provider.RoleSystem, Content: "You are the Worker. " + strings.Repeat("Read before you patch. ", 300)}, {Role: provider.RoleUser, Content: "plan_v1:\n{\"steps\":[{\"id\":\"s1\"}]}\nfix auth.go"}}
		first, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: long, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		if first.Usage.CachedInputTokens != 0 || len(first.ToolCalls) != 0 && first.FinishReason != provider.FinishToolUse {
			t.Errorf("first: %+v", first)
		}
		second, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: long, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		st := s.Stats()
		if second.Usage.CachedInputTokens < fakemodel.CacheMinTokens || second.Usage.CachedInputTokens != st.CachedTokens || second.Usage.InputTokens != st.PromptTokens/2 {
			t.Errorf("stream=%v second usage %+v, server %+v", stream, second.Usage, st)
		}
	}
}

func TestRetriesAgainstTheFake(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header http.Header
		n      int
		waits  []time.Duration
	}{
		{"rate limited with retry-after", 429, http.Header{"Retry-After": {"3"}}, 1, []time.Duration{3 * time.Second}},
		{"overloaded twice", 503, nil, 2, []time.Duration{500 * time.Millisecond, time.Second}},
		{"server error", 500, nil, 1, []time.Duration{500 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fakemodel.Start(t, fakemodel.Options{})
			s.Fail(tt.n, tt.status, tt.header)
			prov, w := newProvider(t, fakeProfile(s, ""), false)
			if _, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: roleInputs["plan_v1"]}); err != nil {
				t.Fatal(err)
			}
			w.Check(t, tt.waits...)
			if got := s.Requests("POST /v1/chat/completions"); got != tt.n+1 {
				t.Errorf("requests = %d, want %d", got, tt.n+1)
			}
		})
	}
}

func TestRejectedKeyAndUnknownModel(t *testing.T) {
	s := fakemodel.Start(t, fakemodel.Options{Key: "sk-right", Model: "m"})
	wrongKey := fakeProfile(s, "sk-wrong")
	unknown := fakeProfile(s, "sk-right")
	unknown.Model = "no-such-model"
	tests := []struct {
		name   string
		p      provider.Profile
		status int
		kind   error
		fix    string
	}{
		{"key rejected", wrongKey, 401, provider.ErrKeyRejected, "OPENAI_API_KEY"},
		{"unknown model", unknown, 404, provider.ErrUnknownModel, "AGENTOS_MODEL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prov, w := newProvider(t, tt.p, false)
			_, err := prov.Complete(context.Background(), provider.CompletionRequest{Messages: lead})
			exchange.CheckError(t, err, w, exchange.WantError{Provider: Name, Status: tt.status, Attempts: 1, Message: map[int]string{401: "not authorized", 404: "request rejected"}[tt.status]})
			err = prov.Check(context.Background())
			var pe *provider.PreflightError
			if !errors.As(err, &pe) || !errors.Is(err, tt.kind) || pe.Status != tt.status || !strings.Contains(err.Error(), tt.fix) {
				t.Fatalf("Check: %v, want %v (HTTP %d) naming %s", err, tt.kind, tt.status, tt.fix)
			}
			if strings.Contains(err.Error(), "sk-wrong") {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
	good, _ := newProvider(t, fakeProfile(s, "sk-right"), false)
	if err := good.Check(context.Background()); err != nil {
		t.Errorf("Check of a good configuration: %v", err)
	}
}

func TestCheckUnreachableEndpoints(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/v1"
	l.Close()
	s := fakemodel.Start(t, fakemodel.Options{})
	noV1 := strings.TrimSuffix(s.URL(), "/v1")
	for name, base := range map[string]string{"nothing listens": closed, "base URL without /v1": noV1} {
		t.Run(name, func(t *testing.T) {
			p := fakeProfile(s, "")
			p.BaseURL = base
			prov, _ := newProvider(t, p, false)
			err := prov.Check(context.Background())
			if !errors.Is(err, provider.ErrUnreachable) || !strings.Contains(err.Error(), "OPENAI_BASE_URL") || !provider.Fatal(err) {
				t.Errorf("Check: %v, want an unreachable endpoint naming OPENAI_BASE_URL", err)
			}
		})
	}
	// A listed model is found without a second request; one the list lacks
	// but the server serves (GET /models/{id}) is accepted.
	s2 := fakemodel.Start(t, fakemodel.Options{Model: "m"})
	prov, _ := newProvider(t, fakeProfile(s2, ""), false)
	if err := prov.Check(context.Background()); err != nil || s2.Requests("GET /v1/models/m") != 0 {
		t.Errorf("Check: %v; GET /models/m %d times", err, s2.Requests("GET /v1/models/m"))
	}
}

func TestPreflightCachesSuccess(t *testing.T) {
	s := fakemodel.Start(t, fakemodel.Options{Key: "sk-cache"})
	p := fakeProfile(s, "sk-cache")
	for i := 0; i < 3; i++ {
		prov, _ := newProvider(t, p, false) // a new adapter per run, as the bot builds them
		if err := provider.Preflight(context.Background(), provider.Checked{P: provider.Priced{P: prov}, Reg: schemas.MustDefault()}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Requests("GET /v1/models"); got != 1 {
		t.Errorf("GET /models %d times, want 1 (success is cached)", got)
	}
	bad := p
	bad.APIKey = "sk-other"
	for i := 0; i < 2; i++ {
		prov, _ := newProvider(t, bad, false)
		if err := provider.Preflight(context.Background(), prov); !errors.Is(err, provider.ErrKeyRejected) {
			t.Fatalf("Preflight with a wrong key: %v", err)
		}
	}
	if got := s.Requests("GET /v1/models"); got != 3 {
		t.Errorf("GET /models %d times, want 3 (failures are not cached)", got)
	}
}

func TestDefaultBaseURL(t *testing.T) {
	if provider.DefaultBaseURLs[Name] != DefaultBaseURL {
		t.Errorf("provider.DefaultBaseURLs[%q] = %q, the adapter uses %q", Name, provider.DefaultBaseURLs[Name], DefaultBaseURL)
	}
}
