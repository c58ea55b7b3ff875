package simulator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

// complete posts a Chat Completions request for the worker's conversation
// and returns the message the simulator answers.
func complete(t *testing.T, s *Server, model string, msgs []map[string]any) map[string]any {
	t.Helper()
	tools := []map[string]any{}
	for _, n := range []string{"repo_read", "repo_search", "repo_write", "test_run"} {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": n}})
	}
	body, _ := json.Marshal(map[string]any{"model": model, "tools": tools, "messages": append([]map[string]any{
		{"role": "system", "content": "You are the Worker."},
		{"role": "user", "content": "plan_v1:\n{\"steps\":[{\"id\":\"s1\"}]}"},
	}, msgs...)})
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message map[string]any `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return out.Choices[0].Message
}

// exchange is one earlier call and the result agentos sent back for it.
func exchange(id, name, args, result string) []map[string]any {
	return []map[string]any{
		{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}},
		{"role": "tool", "tool_call_id": id, "content": result},
	}
}

func calledTool(msg map[string]any) string {
	calls, _ := msg["tool_calls"].([]any)
	if len(calls) != 1 {
		return ""
	}
	fn, _ := calls[0].(map[string]any)["function"].(map[string]any)
	name, _ := fn["name"].(string)
	return name
}

// The simulated model decides from what its tool results say, not from
// a script: after a near-miss name it takes the name the error suggests,
// and with no suggestion it gives up and reports.
func TestNearMissFollowsTheSuggestion(t *testing.T) {
	s := Start(t)
	tests := exchange("c1", "test_run", "{}", `{"call_id":"c1","tool":"test.run","ok":true,"result":{"exit_code":1,"passed":false}}`)
	for _, tt := range []struct {
		name, result, want string
	}{
		{"with a suggestion", `{"call_id":"c2","tool":"repo_reed","ok":false,"error":{"code":"TOOL_NOT_FOUND","message":"no tool named \"repo_reed\"; did you mean \"repo.read\"?"}}`, "repo_read"},
		{"without one", `{"call_id":"c2","tool":"repo_reed","ok":false,"error":{"code":"TOOL_NOT_FOUND","message":"no tool named \"repo_reed\""}}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg := complete(t, s, ModelPrefix+NearMissTool, append(append([]map[string]any{}, tests...), exchange("c2", "repo_reed", `{"path":"auth.go"}`, tt.result)...))
			if got := calledTool(msg); got != tt.want {
				t.Errorf("called %q, want %q (message %v)", got, tt.want, msg)
			}
			if tt.want == "" && msg["content"] == nil {
				t.Errorf("no report after giving up: %v", msg)
			}
		})
	}
	// The first answer is the near miss itself, after the tests ran.
	if got := calledTool(complete(t, s, ModelPrefix+NearMissTool, tests)); got != "repo_reed" {
		t.Errorf("first read called %q, want the near miss repo_reed", got)
	}
}
