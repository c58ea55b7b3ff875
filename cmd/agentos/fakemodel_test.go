package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/fakemodel"
	agentrun "github.com/agentos/agentos/runtime/run"
)

const fakeKey = "sk-fake-0123456789abcdef"

// openAIEnv points the process at a fake model server the way a user
// points it at Ollama or vLLM: the OpenAI SDK's variables.
func openAIEnv(t *testing.T, baseURL, key, model string) {
	t.Helper()
	for k, v := range map[string]string{
		"AGENTOS_PROVIDER": "openai", "AGENTOS_MODEL": model, "OPENAI_BASE_URL": baseURL, "OPENAI_API_KEY": key,
		"AGENTOS_BASE_URL": "", "AGENTOS_API_KEY": "", "AGENTOS_PROFILE": "", "OPENAI_ORG_ID": "", "OPENAI_PROJECT_ID": "",
	} {
		t.Setenv(k, v)
	}
}

// TestRunAgainstFakeModel: `agentos run` with OPENAI_BASE_URL,
// OPENAI_API_KEY, AGENTOS_PROVIDER and AGENTOS_MODEL against the fake
// model server fixes the demo bug (the patch approved with `agentos
// approve`), whether the server honours response_format or ignores it; the
// repairs the second needs are events, and `agentos verify` accepts the
// log.
func TestRunAgainstFakeModel(t *testing.T) {
	testenv.LookPath(t, "go") // test.run runs the sample's go test
	for _, ignore := range []bool{false, true} {
		name := map[bool]string{false: "honours response_format", true: "ignores response_format"}[ignore]
		t.Run(name, func(t *testing.T) {
			srv := fakemodel.Start(t, fakemodel.Options{Key: fakeKey, Model: "m", IgnoreResponseFormat: ignore, Seed: 0})
			openAIEnv(t, srv.URL(), fakeKey, "m")
			repo, data := t.TempDir(), t.TempDir()
			if err := demo.WriteSample(repo); err != nil {
				t.Fatal(err)
			}
			common := []string{"--repo", repo, "--data", data, "--json"}
			stdout, stderr, code := runCLI(t, append([]string{"run", "--session", "fm"}, append(common, demo.Prompt)...)...)
			var r1 runReport
			if code != exitApproval || json.Unmarshal([]byte(stdout), &r1) != nil || r1.Status != "paused" || len(r1.Pending) != 1 || r1.Pending[0].Tool != "repo.patch" {
				t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
			}
			host := strings.TrimPrefix(strings.TrimSuffix(srv.URL(), "/v1"), "http://")
			if want := "provider openai, model m (AGENTOS_MODEL), endpoint " + host + " (OPENAI_BASE_URL), key from OPENAI_API_KEY"; !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
			stdout, stderr, code = runCLI(t, append([]string{"approve", "fm", r1.Pending[0].ApprovalID, "--by", "octocat"}, common...)...)
			var r2 runReport
			if code != 0 || json.Unmarshal([]byte(stdout), &r2) != nil || r2.Status != "completed" {
				t.Fatalf("approve: exit %d\n%s\n%s", code, stdout, stderr)
			}
			if strings.Contains(stdout+stderr, fakeKey) {
				t.Error("the API key was printed")
			}
			if _, verr, code := runCLI(t, "verify", r2.LogPath); code != 0 {
				t.Fatalf("agentos verify: exit %d %s", code, verr)
			}
			evs, err := readJSONL(r2.LogPath)
			if err != nil {
				t.Fatal(err)
			}
			var repairs []string
			for _, e := range evs {
				if e.Type == event.RoleOutputRepaired {
					repairs = append(repairs, e.Actor+":"+event.FieldString(e.Payload, "step"))
				}
				if strings.Contains(string(e.Payload), fakeKey) {
					t.Errorf("the key is in the log: %s", e.Type)
				}
			}
			sort.Strings(repairs)
			// Seed 0 gives the lead plain JSON, the planner a fence, the
			// worker a sentence around its report and the reviewer JSON
			// that misses schema_version.
			want := ""
			if ignore {
				want = "planner:strip_fence reviewer:repair_turn worker:extract_object"
			}
			if got := strings.Join(repairs, " "); got != want {
				t.Errorf("repairs %q, want %q", got, want)
			}
			if got := srv.Stats().ResponseFormats; len(got) < 3 {
				t.Errorf("response formats requested: %v, want the lead's, the planner's and the reviewer's", got)
			}
			if b, _ := os.ReadFile(filepath.Join(repo, "auth.go")); !strings.Contains(string(b), "subtle.ConstantTimeCompare") {
				t.Errorf("auth.go is not fixed:\n%s", b)
			}
			cmd := exec.Command("go", "test", "./...")
			cmd.Dir = repo
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("the sample's tests fail after the run: %v\n%s", err, out)
			}
		})
	}
}

// TestRunRefusesBadProviderConfig: a rejected key, an unknown model or an
// endpoint that does not answer stop `agentos run` before the run starts
// (nothing is stored, no completion is requested), with a message naming
// the variable to set and never the key.
func TestRunRefusesBadProviderConfig(t *testing.T) {
	srv := fakemodel.Start(t, fakemodel.Options{Key: fakeKey, Model: "m"})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/v1"
	l.Close()
	tests := []struct {
		name, base, key, model, want string
	}{
		{"wrong key", srv.URL(), "sk-wrong-key-987654321", "m", "set OPENAI_API_KEY"},
		{"unknown model", srv.URL(), fakeKey, "gpt-nonexistent", "set AGENTOS_MODEL"},
		{"nothing listens", closed, fakeKey, "m", "set OPENAI_BASE_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			openAIEnv(t, tt.base, tt.key, tt.model)
			repo, data := t.TempDir(), t.TempDir()
			if err := demo.WriteSample(repo); err != nil {
				t.Fatal(err)
			}
			stdout, stderr, code := runCLI(t, "run", "--repo", repo, "--data", data, demo.Prompt)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, want %d with %q:\n%s%s", code, exitUsage, tt.want, stdout, stderr)
			}
			if strings.Contains(stdout+stderr, tt.key) {
				t.Errorf("the key is printed:\n%s", stderr)
			}
			if entries, _ := os.ReadDir(data); len(entries) != 0 {
				t.Errorf("the run started: the data directory holds %v", entries)
			}
		})
	}
	if n := srv.Requests("POST /v1/chat/completions"); n != 0 {
		t.Errorf("%d completions were requested", n)
	}
}

// TestServeProviderCheck: serve refuses to start with a rejected key or an
// unknown model, and starts (logging the problem) when the endpoint does
// not answer yet.
func TestServeProviderCheck(t *testing.T) {
	srv := fakemodel.Start(t, fakemodel.Options{Key: fakeKey, Model: "m"})
	env := func(base, key, model string) map[string]string {
		return map[string]string{"AGENTOS_API_TOKEN": serveToken, "AGENTOS_PROVIDER": "openai", "OPENAI_BASE_URL": base, "OPENAI_API_KEY": key, "AGENTOS_MODEL": model}
	}
	for name, tt := range map[string]struct {
		env  map[string]string
		want string
	}{
		"wrong key":     {env(srv.URL(), "sk-wrong-key-987654321", "m"), "set OPENAI_API_KEY"},
		"unknown model": {env(srv.URL(), fakeKey, "nope"), "set AGENTOS_MODEL"},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &logBuf{}
			err := serve(context.Background(), []string{"--data", t.TempDir(), "--addr", "127.0.0.1:0"}, io.Discard, serveDeps{getenv: func(k string) string { return tt.env[k] }, logger: slog.New(slog.NewTextHandler(logs, nil))})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve: %v, want a refusal naming %q", err, tt.want)
			}
			if !strings.Contains(logs.String(), "provider openai") {
				t.Errorf("the resolved provider is not logged:\n%s", logs)
			}
			if strings.Contains(logs.String()+err.Error(), tt.env["OPENAI_API_KEY"]) {
				t.Errorf("the key is logged:\n%s%v", logs, err)
			}
		})
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/v1"
	l.Close()
	s := startServe(t, env(closed, fakeKey, "m"))
	code, _ := httpDo(t, "GET", s.url+"/healthz", "", "", nil)
	if code != 200 {
		t.Fatalf("healthz %d: the server did not start", code)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.logs.String(), "the model endpoint does not answer") || !strings.Contains(s.logs.String(), "OPENAI_BASE_URL") {
		t.Errorf("the unreachable endpoint is not logged:\n%s", s.logs)
	}
}

// fakeDemo runs the demo task in process with the openai adapter against a
// fake model server, approving the patch, and returns the server and the
// events. memory, if not empty, is the repository's .agent/memory.md.
func fakeDemo(t *testing.T, o fakemodel.Options, memory string) (*fakemodel.Server, agentrun.Outcome, []event.Event) {
	t.Helper()
	srv := fakemodel.Start(t, o)
	repo := t.TempDir()
	if err := demo.WriteSample(repo); err != nil {
		t.Fatal(err)
	}
	if memory != "" {
		if err := os.MkdirAll(filepath.Join(repo, ".agent"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, ".agent", "memory.md"), []byte(memory), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	prof := provider.DefaultProfile()
	prof.Provider, prof.Model, prof.BaseURL, prof.APIKey = "openai", srv.Model(), srv.URL(), o.Key
	env, err := buildRuntime(context.Background(), envOptions{repo: repo, dataDir: t.TempDir(), profile: prof, sessionID: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	ctx := context.Background()
	out, err := env.mgr.Start(ctx, env.engine, agentrun.StartRequest{SessionID: "fake", Prompt: demo.Prompt, Cwd: env.ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	for out.Status == "paused" {
		if err := env.mgr.Resolve(ctx, "fake", out.Pending[0].ApprovalID, "approve", "octocat", ""); err != nil {
			t.Fatal(err)
		}
		if out, err = env.mgr.Resume(ctx, env.engine, "fake", env.ws.Root(), ""); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := env.store.Read(ctx, "fake", 1)
	if err != nil {
		t.Fatal(err)
	}
	return srv, out, evs
}

// memoryFile is a repository memory of the size projects keep (a few
// kilobytes of conventions), for the prompt-cache figures.
var memoryFile = "# Project conventions\n\n" + strings.Repeat("- Tokens are compared in constant time; never with strings.HasPrefix or ==. Tests live next to the code and run with go test ./...; keep changes small and explain them in the report.\n", 30)

// TestPromptCacheFigures runs the demo flow through the openai adapter
// against the fake model server (OpenAI's prefix-cache rule) and prints
// its input tokens, cached tokens and cost at gpt-5.4-mini's list prices:
//
//	go test ./cmd/agentos -run PromptCacheFigures -v
//
// It checks that what agentos records (input and cached tokens, cost) is
// what the server reported, priced as the provider prices it.
func TestPromptCacheFigures(t *testing.T) {
	testenv.LookPath(t, "go")
	price, _ := provider.ListPrice("gpt-5.4-mini")
	for _, sc := range []struct {
		name   string
		ignore bool
		memory string
	}{
		{"demo, response_format honoured", false, ""},
		{"demo, response_format ignored", true, ""},
		{"demo with a 6 KB memory file", false, memoryFile},
	} {
		srv, res, evs := fakeDemo(t, fakemodel.Options{Key: "sk-test", Model: "gpt-5.4-mini", IgnoreResponseFormat: sc.ignore}, sc.memory)
		if res.Status != "completed" {
			t.Fatalf("%s: the run ended %s: %+v", sc.name, res.Status, res.Terminal)
		}
		var got provider.Usage
		for _, e := range evs {
			if e.Type == event.LLMResponse {
				u := event.Field(event.Field(e.Payload, "response"), "usage")
				got = got.Add(provider.Usage{InputTokens: event.FieldInt(u, "input_tokens"), OutputTokens: event.FieldInt(u, "output_tokens"),
					CachedInputTokens: event.FieldInt(u, "cached_input_tokens"), CostUSD: event.FieldFloat(u, "cost_usd")})
			}
		}
		st := srv.Stats()
		noCache := price.Cost(provider.Usage{InputTokens: st.PromptTokens, OutputTokens: st.CompletionTokens})
		t.Logf("%s: %d model calls; input %d tokens, %d cached (%.0f%%); output %d; cost $%.6f (without the cache discount $%.6f)",
			sc.name, st.Completions, got.InputTokens, got.CachedInputTokens, 100*float64(got.CachedInputTokens)/float64(max(got.InputTokens, 1)), got.OutputTokens, got.CostUSD, noCache)
		want := price.Cost(provider.Usage{InputTokens: st.PromptTokens, CachedInputTokens: st.CachedTokens, OutputTokens: st.CompletionTokens})
		if got.InputTokens != st.PromptTokens || got.CachedInputTokens != st.CachedTokens || math.Abs(got.CostUSD-want) > 1e-9 {
			t.Errorf("%s: agentos recorded %+v, the server reported %d input, %d cached, %d output (cost $%.6f)", sc.name, got, st.PromptTokens, st.CachedTokens, st.CompletionTokens, want)
		}
		if got.CachedInputTokens == 0 {
			t.Errorf("%s: nothing was read from the prompt cache", sc.name)
		}
	}
}

// TestCheckProviderLine: the start-up line the Action (and run, and serve)
// prints names the provider, model, endpoint and the key's variable, not
// the key; a scripted profile has nothing to check.
func TestCheckProviderLine(t *testing.T) {
	srv := fakemodel.Start(t, fakemodel.Options{Key: fakeKey, Model: "m"})
	prof, err := provider.LoadProfile("", func(k string) string {
		return map[string]string{"AGENTOS_PROVIDER": "openai", "OPENAI_BASE_URL": srv.URL(), "GEMINI_API_KEY": "unrelated", "OPENAI_API_KEY": fakeKey, "AGENTOS_MODEL": "m"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := checkProvider(context.Background(), prof, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "provider openai, model m (AGENTOS_MODEL)") || strings.Contains(out.String(), fakeKey) {
		t.Errorf("start-up line %q", out.String())
	}
	if err := preflight(context.Background(), prof); err != nil {
		t.Fatal(err)
	}
	if n := srv.Requests("GET /v1/models"); n != 1 {
		t.Errorf("GET /models %d times, want 1: a success is cached", n)
	}
	scripted := provider.DefaultProfile()
	scripted.Script = "does-not-matter.yaml"
	out.Reset()
	if err := checkProvider(context.Background(), scripted, &out); err != nil || !strings.Contains(out.String(), "provider scripted") {
		t.Errorf("scripted: %v %q", err, out.String())
	}
}

// TestBotPreflight: the bot's check before a new run makes configuration
// errors permanent (the delivery is not redelivered), keeps an unreachable
// endpoint retryable, and lets a momentarily unavailable one through.
func TestBotPreflight(t *testing.T) {
	srv := fakemodel.Start(t, fakemodel.Options{Key: fakeKey, Model: "m"})
	// A server in trouble: every request gets 503.
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"The server is overloaded","type":"server_error"}}`)
	}))
	defer busy.Close()
	profile := func(base, key, model string) provider.Profile {
		t.Helper()
		p, err := provider.LoadProfile("", func(k string) string {
			return map[string]string{"AGENTOS_PROVIDER": "openai", "OPENAI_BASE_URL": base, "OPENAI_API_KEY": key, "AGENTOS_MODEL": model}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/v1"
	ln.Close()
	cases := []struct {
		name            string
		prof            provider.Profile
		wantErr, wantPm bool
	}{
		{"works", profile(srv.URL(), fakeKey, "m"), false, false},
		{"key rejected", profile(srv.URL(), "sk-wrong-key-0000", "m"), true, true},
		{"unknown model", profile(srv.URL(), fakeKey, "no-such-model"), true, true},
		{"unreachable", profile(closed, fakeKey, "m"), true, false},
		{"unavailable", profile(busy.URL+"/v1", fakeKey, "m"), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "unavailable" {
				// The check itself sees the outage; the bot lets the run start.
				if err := providerPreflight(tc.prof)(context.Background()); err == nil || provider.Fatal(err) {
					t.Fatalf("the check saw %v, want an unavailable endpoint", err)
				}
			}
			err := botPreflight(tc.prof)(context.Background())
			if (err != nil) != tc.wantErr || errors.Is(err, webhook.ErrPermanent) != tc.wantPm {
				t.Errorf("err = %v; want error %v, permanent %v", err, tc.wantErr, tc.wantPm)
			}
		})
	}
}
