package run

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A tool result larger than the model's share of the context reaches the
// model as valid JSON that keeps the members saying where to go on
// (truncated, end_line, sha256 of a read; the search's truncated), its
// long strings and lists shortened, with a note: never half a document.
func TestToolMessageKeepsALargeResultValid(t *testing.T) {
	var content strings.Builder
	for i := 1; content.Len() < 20000; i++ {
		fmt.Fprintf(&content, "line %d: token=rejected \"quoted\" <tag> é\n", i)
	}
	read, _ := json.Marshal(map[string]any{"path": "access.log", "content": content.String(), "size": 2 << 20, "start_line": 1, "end_line": 371,
		"truncated": true, "sha256": strings.Repeat("ab", 32), "total_lines": 40000})
	var matches []map[string]any
	for i := 1; i <= 400; i++ {
		matches = append(matches, map[string]any{"path": "testdata/access.log", "line": i, "text": "GET /api/items token=rejected client=xxxxxxxx"})
	}
	search, _ := json.Marshal(map[string]any{"matches": matches, "truncated": true, "files_scanned": 4})
	for name, c := range map[string]struct {
		result json.RawMessage
		keep   []string
	}{
		"read":   {read, []string{"truncated", "end_line", "sha256", "total_lines", "path"}},
		"search": {search, []string{"truncated", "files_scanned"}},
	} {
		t.Run(name, func(t *testing.T) {
			msg := toolMessage(ToolOutcome{CallID: "c1", Tool: "repo." + name, OK: true, Result: c.result})
			if len(msg) > toolMessageCap {
				t.Errorf("message of %d bytes, over the cap %d", len(msg), toolMessageCap)
			}
			var got struct {
				OK     bool           `json:"ok"`
				Result map[string]any `json:"result"`
			}
			if err := json.NewDecoder(strings.NewReader(msg)).Decode(&got); err != nil {
				t.Fatalf("the model gets no valid JSON: %v\n…%s", err, msg[max(0, len(msg)-200):])
			}
			var want map[string]any
			_ = json.Unmarshal(c.result, &want)
			for _, k := range c.keep {
				if fmt.Sprint(got.Result[k]) != fmt.Sprint(want[k]) {
					t.Errorf("%s = %v, want %v", k, got.Result[k], want[k])
				}
			}
			if !got.OK || !strings.Contains(msg, "[cut to fit the context") {
				t.Errorf("ok %v, or no note of the cut:\n…%s", got.OK, msg[max(0, len(msg)-200):])
			}
			if name == "read" {
				cut, _ := got.Result["content"].(string)
				if !strings.HasSuffix(cut, "…") || !strings.HasPrefix(content.String(), strings.TrimSuffix(cut, "…")) || len(cut) < 8000 {
					t.Errorf("content is not a long prefix of the file's (%d bytes)", len(cut))
				}
			}
		})
	}
}
