package fakemodel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/patch"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/schemas"
)

func post(t *testing.T, s *Server, key string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/chat/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, res.Header, out
}

func get(t *testing.T, s *Server, key, path string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL()+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func errMessage(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

func simple(model string) map[string]any {
	return map[string]any{"model": model, "messages": []any{map[string]any{"role": "system", "content": "You are the Lead."}, map[string]any{"role": "user", "content": "User request:\nfix auth.go"}}}
}

func TestAuthorizationAndModels(t *testing.T) {
	s := Start(t, Options{Key: "sk-right", Model: "m", OtherModels: []string{"m2"}})
	tests := []struct {
		name       string
		key        string
		model      string
		wantStatus int
		wantCode   string
	}{
		{"no key", "", "m", 401, ""},
		{"wrong key", "sk-wrong-key-1234", "m", 401, "invalid_api_key"},
		{"unknown model", "sk-right", "gpt-nope", 404, "model_not_found"},
		{"served", "sk-right", "m", 200, ""},
		{"other served", "sk-right", "m2", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := post(t, s, tt.key, simple(tt.model))
			if status != tt.wantStatus || errCode(body) != tt.wantCode {
				t.Errorf("status %d code %q, want %d %q (%v)", status, errCode(body), tt.wantStatus, tt.wantCode, body)
			}
		})
	}
	if status, body := get(t, s, "sk-right", "/models"); status != 200 || len(body["data"].([]any)) != 2 {
		t.Errorf("GET /models: %d %v", status, body)
	}
	if status, body := get(t, s, "sk-right", "/models/m2"); status != 200 || body["id"] != "m2" {
		t.Errorf("GET /models/m2: %d %v", status, body)
	}
	if status, body := get(t, s, "sk-right", "/models/x"); status != 404 || errCode(body) != "model_not_found" {
		t.Errorf("GET /models/x: %d %v", status, body)
	}
	if status, _ := get(t, s, "", "/models"); status != 401 {
		t.Errorf("GET /models without a key: %d, want 401", status)
	}
	if got := s.Requests("POST /v1/chat/completions"); got != len(tests) {
		t.Errorf("counted %d completion requests, want %d", got, len(tests))
	}
	if st := s.Stats(); st.Completions != 2 {
		t.Errorf("answered completions = %d, want 2", st.Completions)
	}
}

func TestMalformedRequests(t *testing.T) {
	s := Start(t, Options{})
	user := map[string]any{"role": "user", "content": "x"}
	call := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}}
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"no model", map[string]any{"messages": []any{user}}, "model parameter"},
		{"no messages", map[string]any{"model": DefaultModel, "messages": []any{}}, "too short"},
		{"unknown parameter", map[string]any{"model": DefaultModel, "messages": []any{user}, "frobnicate": true}, "Unrecognized request argument supplied: frobnicate"},
		{"dotted tool name", map[string]any{"model": DefaultModel, "messages": []any{user}, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "repo.read"}}}}, "does not match pattern"},
		{"tool answer without a call", map[string]any{"model": DefaultModel, "messages": []any{user, map[string]any{"role": "tool", "tool_call_id": "c9", "content": "x"}}}, "preceeding message with 'tool_calls'"},
		{"call without an answer", map[string]any{"model": DefaultModel, "messages": []any{user, call, user}}, "did not have response messages: c1"},
		{"bad role", map[string]any{"model": DefaultModel, "messages": []any{map[string]any{"role": "robot", "content": "x"}}}, "Invalid value: 'robot'"},
		{"both token limits", map[string]any{"model": DefaultModel, "messages": []any{user}, "max_tokens": 5, "max_completion_tokens": 5}, "cannot both be set"},
		{"strict schema with an optional property", map[string]any{"model": DefaultModel, "messages": []any{user}, "response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "plan_v1", "strict": true, "schema": map[string]any{"type": "object", "additionalProperties": false, "required": []any{"a"}, "properties": map[string]any{"a": map[string]any{"type": "string"}, "b": map[string]any{"type": "string"}}}}}}, "Missing 'b'"},
		{"strict schema open object", map[string]any{"model": DefaultModel, "messages": []any{user}, "response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "strict": true, "schema": map[string]any{"type": "object", "properties": map[string]any{}}}}}, "'additionalProperties' is required"},
		{"strict schema with minLength", map[string]any{"model": DefaultModel, "messages": []any{user}, "response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "strict": true, "schema": map[string]any{"type": "object", "additionalProperties": false, "required": []any{"a"}, "properties": map[string]any{"a": map[string]any{"type": "string", "minLength": 1}}}}}}, "'minLength' is not permitted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := post(t, s, "", tt.body)
			if status != 400 || !strings.Contains(errMessage(body), tt.want) {
				t.Errorf("status %d message %q, want 400 mentioning %q", status, errMessage(body), tt.want)
			}
		})
	}
}

func TestCachedFor(t *testing.T) {
	tests := []struct{ shared, prompt, want int }{
		{0, 5000, 0},
		{1023, 5000, 0},
		{1024, 1023, 0},
		{1024, 5000, 1024},
		{1151, 5000, 1024},
		{1152, 5000, 1152},
		{4000, 3000, 2944}, // never more than the prompt, in whole steps
	}
	for _, tt := range tests {
		if got := CachedFor(tt.shared, tt.prompt); got != tt.want {
			t.Errorf("CachedFor(%d, %d) = %d, want %d", tt.shared, tt.prompt, got, tt.want)
		}
	}
}

func cachedOf(body map[string]any) float64 {
	u, _ := body["usage"].(map[string]any)
	d, _ := u["prompt_tokens_details"].(map[string]any)
	c, _ := d["cached_tokens"].(float64)
	return c
}

func TestPromptCache(t *testing.T) {
	s := Start(t, Options{})
	long := "You are the Lead. " + strings.Repeat("Keep the prefix stable. ", 400) // ~2400 tokens
	req := func(system, user string) map[string]any {
		return map[string]any{"model": DefaultModel, "messages": []any{map[string]any{"role": "system", "content": system}, map[string]any{"role": "user", "content": user}}}
	}
	_, _, first := post(t, s, "", req(long, "User request:\nfix auth.go"))
	if c := cachedOf(first); c != 0 {
		t.Errorf("first request cached %v tokens, want 0", c)
	}
	_, _, second := post(t, s, "", req(long, "User request:\nsomething else"))
	c := cachedOf(second)
	if c < CacheMinTokens || int(c-CacheMinTokens)%CacheIncrement != 0 {
		t.Errorf("second request cached %v tokens, want ≥ %d in %d-token steps", c, CacheMinTokens, CacheIncrement)
	}
	_, _, other := post(t, s, "", req("You are the Planner. "+long, "x"))
	if c := cachedOf(other); c != 0 {
		t.Errorf("a different prefix cached %v tokens, want 0", c)
	}
	if st := s.Stats(); st.CachedTokens != int64(c) {
		t.Errorf("stats cached = %d, want %v", st.CachedTokens, c)
	}
}

func TestInjectedFailures(t *testing.T) {
	s := Start(t, Options{})
	s.Fail(1, 429, http.Header{"Retry-After": {"2"}})
	s.Fail(1, 503, nil)
	status, h, body := post(t, s, "", simple(DefaultModel))
	if status != 429 || h.Get("Retry-After") != "2" || errCode(body) != "rate_limit_exceeded" {
		t.Errorf("first: %d retry-after %q %v", status, h.Get("Retry-After"), body)
	}
	if status, _, _ := post(t, s, "", simple(DefaultModel)); status != 503 {
		t.Errorf("second: %d, want 503", status)
	}
	if status, _, _ := post(t, s, "", simple(DefaultModel)); status != 200 {
		t.Errorf("third: %d, want 200", status)
	}
}

var tools = []any{
	map[string]any{"type": "function", "function": map[string]any{"name": "repo_patch", "parameters": map[string]any{"type": "object"}}},
	map[string]any{"type": "function", "function": map[string]any{"name": "repo_read", "parameters": map[string]any{"type": "object"}}},
	map[string]any{"type": "function", "function": map[string]any{"name": "test_run", "parameters": map[string]any{"type": "object"}}},
}

const workerUser = "lead_directive_v1:\n{\"intent\":\"Fix the failing token check in auth.go\"}\n\nplan_v1:\n{\"steps\":[{\"id\":\"s1\"},{\"id\":\"s2\"},{\"id\":\"s3\"},{\"id\":\"s4\"}]}"

// worker holds one worker conversation against a server.
type worker struct {
	t       *testing.T
	s       *Server
	msgs    []any
	pending string // the id of the call awaiting its result
}

func newWorker(t *testing.T, s *Server) *worker {
	return &worker{t: t, s: s, msgs: []any{map[string]any{"role": "system", "content": "You are the Worker."}, map[string]any{"role": "user", "content": workerUser}}}
}

// turn asks for the next step; it returns the tool called and its
// arguments, or "" and the text.
func (w *worker) turn() (string, map[string]any, string) {
	w.t.Helper()
	status, _, body := post(w.t, w.s, "", map[string]any{"model": DefaultModel, "messages": w.msgs, "tools": tools})
	if status != 200 {
		w.t.Fatalf("status %d: %v", status, body)
	}
	msg := body["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	calls, _ := msg["tool_calls"].([]any)
	if len(calls) == 0 {
		text, _ := msg["content"].(string)
		return "", nil, text
	}
	w.msgs = append(w.msgs, map[string]any{"role": "assistant", "content": msg["content"], "tool_calls": calls})
	c := calls[0].(map[string]any)
	fn := c["function"].(map[string]any)
	var args map[string]any
	if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil {
		w.t.Fatalf("arguments %q: %v", fn["arguments"], err)
	}
	w.pending = c["id"].(string)
	return fn["name"].(string), args, ""
}

func (w *worker) result(tool string, outcome map[string]any) {
	outcome["tool"] = tool
	b, _ := json.Marshal(outcome)
	w.msgs = append(w.msgs, map[string]any{"role": "tool", "tool_call_id": w.pending, "content": string(b)})
}

func sample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := demo.WriteSample(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "auth.go"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWorkerFollowsToolResults(t *testing.T) {
	s := Start(t, Options{})
	w := newWorker(t, s)
	failing := map[string]any{"ok": true, "result": map[string]any{"exit_code": 1, "passed": false, "stdout": "--- FAIL: TestCheckToken (0.00s)\n    auth_test.go:18: CheckToken(\"s3cret\", \"s3cret-token\") = true, want false\nFAIL\n"}}
	steps := []struct {
		wantTool string
		reply    func(args map[string]any) map[string]any
	}{
		{"test_run", func(map[string]any) map[string]any { return failing }},
		{"repo_read", func(args map[string]any) map[string]any {
			if args["path"] != "auth.go" {
				t.Fatalf("read %v, want auth.go (named by the failing test)", args)
			}
			return map[string]any{"ok": true, "result": map[string]any{"path": "auth.go", "content": sample(t)}}
		}},
		{"repo_patch", func(args map[string]any) map[string]any {
			files, err := patch.Parse(args["unifiedDiff"].(string))
			if err != nil || len(files) != 1 {
				t.Fatalf("the patch does not parse: %v\n%s", err, args["unifiedDiff"])
			}
			out, err := files[0].Apply([]byte(sample(t)))
			if err != nil {
				t.Fatalf("the patch does not apply: %v", err)
			}
			if _, err := parser.ParseFile(token.NewFileSet(), "auth.go", out, 0); err != nil || !bytes.Contains(out, []byte("subtle.ConstantTimeCompare")) || bytes.Contains(out, []byte(`"strings"`)) {
				t.Fatalf("patched file (parse error %v):\n%s", err, out)
			}
			return map[string]any{"ok": true, "result": map[string]any{"files": []any{map[string]any{"path": "auth.go", "op": "modify"}}}}
		}},
		{"test_run", func(map[string]any) map[string]any {
			return map[string]any{"ok": true, "result": map[string]any{"exit_code": 0, "passed": true, "stdout": "ok  \tauthdemo\t0.002s\n"}}
		}},
	}
	for i, st := range steps {
		tool, args, text := w.turn()
		if tool != st.wantTool {
			t.Fatalf("turn %d: called %q (text %q), want %s", i+1, tool, text, st.wantTool)
		}
		w.result(canonical(tool), st.reply(args))
	}
	tool, _, text := w.turn()
	if tool != "" {
		t.Fatalf("after the passing test the worker called %s, want its report", tool)
	}
	if err := schemas.MustDefault().ValidateJSON("worker_report_v1", []byte(text)); err != nil {
		t.Fatalf("report %s: %v", text, err)
	}
	var rep struct {
		Output         string   `json:"output"`
		StepsCompleted []string `json:"steps_completed"`
		ToolCallsMade  []string `json:"tool_calls_made"`
	}
	_ = json.Unmarshal([]byte(text), &rep)
	if len(rep.StepsCompleted) != 4 || len(rep.ToolCallsMade) != 4 || !strings.Contains(rep.Output, "ConstantTimeCompare") {
		t.Errorf("report = %+v", rep)
	}
}

func TestWorkerReportsWhatHappened(t *testing.T) {
	tests := []struct {
		name    string
		results []map[string]any // answers to the calls, in order
		want    string           // in the report's output
		steps   int
	}{
		{"nothing fails", []map[string]any{{"ok": true, "result": map[string]any{"exit_code": 0, "passed": true}}}, "Nothing to fix", 4},
		{"patch denied", []map[string]any{
			{"ok": true, "result": map[string]any{"passed": false, "stdout": "auth_test.go:18: bad"}},
			{"ok": true, "result": map[string]any{"path": "auth.go", "content": "package auth\n\nimport \"strings\"\n\nfunc CheckToken(given, expected string) bool {\n\treturn strings.HasPrefix(expected, given)\n}\n"}},
			{"ok": false, "error": map[string]any{"code": "APPROVAL_DENIED", "message": "octocat denied this action: not today"}},
		}, "Stopped: repo.patch failed (APPROVAL_DENIED)", 2},
		{"unknown bug", []map[string]any{
			{"ok": true, "result": map[string]any{"passed": false, "stdout": "auth_test.go:18: bad"}},
			{"ok": true, "result": map[string]any{"path": "auth.go", "content": "package auth\n"}},
		}, "Could not determine a fix", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorker(t, Start(t, Options{}))
			for _, r := range tt.results {
				tool, _, text := w.turn()
				if tool == "" {
					t.Fatalf("reported early: %s", text)
				}
				w.result(canonical(tool), r)
			}
			tool, _, text := w.turn()
			if tool != "" || !strings.Contains(text, tt.want) {
				t.Fatalf("tool %q text %s, want a report mentioning %q", tool, text, tt.want)
			}
			var rep struct {
				StepsCompleted []string `json:"steps_completed"`
			}
			_ = json.Unmarshal([]byte(text), &rep)
			if len(rep.StepsCompleted) != tt.steps {
				t.Errorf("steps_completed %v, want %d", rep.StepsCompleted, tt.steps)
			}
		})
	}
}

func roleRequest(role, user string, format bool) map[string]any {
	req := map[string]any{"model": DefaultModel, "messages": []any{map[string]any{"role": "system", "content": "You are the " + role + "."}, map[string]any{"role": "user", "content": user}}}
	if format {
		req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": roleSchema[strings.ToLower(role)], "schema": map[string]any{"type": "object"}}}
	}
	return req
}

func content(t *testing.T, body map[string]any) string {
	t.Helper()
	choices, _ := body["choices"].([]any)
	if len(choices) == 0 {
		t.Fatalf("no choices: %v", body)
	}
	c, _ := choices[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	return c
}

func TestReplyShapes(t *testing.T) {
	reviewUser := "plan_v1:\n{\"steps\":[{\"id\":\"s1\"}]}\n\nworker_report_v1 (written by the worker):\n{\"output\":\"done\",\"steps_completed\":[\"s1\"]}"
	users := map[string]string{"Lead": "User request:\nfix the failing token check in auth.go", "Planner": "lead_directive_v1:\n{\"intent\":\"Fix auth.go\"}", "Reviewer": reviewUser}
	ignoring := Start(t, Options{IgnoreResponseFormat: true, Seed: 0})
	honouring := Start(t, Options{})
	reg := schemas.MustDefault()
	// Seed 0: lead plain, planner fenced, worker wrapped, reviewer drifting.
	wants := map[string]func(string) bool{
		"Lead": func(s string) bool {
			return strings.HasPrefix(s, "{") && reg.ValidateJSON("lead_directive_v1", []byte(s)) == nil
		},
		"Planner":  func(s string) bool { return strings.HasPrefix(s, "```json\n{") && strings.HasSuffix(s, "\n```") },
		"Reviewer": func(s string) bool { return strings.HasPrefix(s, "{") && !strings.Contains(s, "schema_version") },
	}
	for role, user := range users {
		_, _, body := post(t, ignoring, "", roleRequest(role, user, true))
		if got := content(t, body); !wants[role](got) {
			t.Errorf("ignoring, %s replied %s", role, got)
		}
		_, _, body = post(t, honouring, "", roleRequest(role, user, true))
		if got := content(t, body); reg.ValidateJSON(roleSchema[strings.ToLower(role)], []byte(got)) != nil {
			t.Errorf("honouring, %s replied %s", role, got)
		}
	}
	// A repair turn is answered with the plain document.
	req := roleRequest("Reviewer", reviewUser, false)
	req["messages"] = append(req["messages"].([]any), map[string]any{"role": "assistant", "content": "{}"}, map[string]any{"role": "user", "content": "Your reply is not valid review_result_v1: schema_version missing"})
	_, _, body := post(t, ignoring, "", req)
	if got := content(t, body); reg.ValidateJSON("review_result_v1", []byte(got)) != nil {
		t.Errorf("repair answer %s", got)
	}
	// The worker's shape for seed 0 is a sentence around the JSON.
	w := newWorker(t, ignoring)
	w.msgs = append(w.msgs[:1], map[string]any{"role": "user", "content": workerUser})
	status, _, body := post(t, ignoring, "", map[string]any{"model": DefaultModel, "messages": w.msgs})
	if got := content(t, body); status != 200 || !strings.HasPrefix(got, "Here is the worker_report_v1") {
		t.Errorf("worker without tools replied %s", got)
	}
}

func TestStreaming(t *testing.T) {
	s := Start(t, Options{})
	w := newWorker(t, s)
	req := map[string]any{"model": DefaultModel, "messages": w.msgs, "tools": tools, "stream": true, "stream_options": map[string]any{"include_usage": true}}
	b, _ := json.Marshal(req)
	res, err := http.Post(s.URL()+"/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var name, args, finish string
	var usage map[string]any
	done := false
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
			Usage map[string]any
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatal(err)
		}
		for _, c := range chunk.Choices {
			for _, tc := range c.Delta.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
	}
	if !done || name != "test_run" || args != "{}" || finish != "tool_calls" || usage == nil {
		t.Errorf("stream: done %v call %s(%s) finish %q usage %v", done, name, args, finish, usage)
	}
}
