package simulator

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
)

var (
	youAreRe    = regexp.MustCompile(`(?i)\byou are the (lead|planner|worker|reviewer|advisor)\b`)
	notValidRe  = regexp.MustCompile(`not valid (\w+_v1)`)
	didYouMean  = regexp.MustCompile(`did you mean "([^"]+)"`)
	reportStart = "worker_report_v1 (written by the worker, not by you):\n"
)

// The demo's bug (runtime/demo) and the simulated model's fix for it.
const (
	bug         = "strings.HasPrefix(expected, given)"
	fixed       = "subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1"
	commentLine = "// CheckToken compares the whole token in constant time."
)

// kernelTools are the capability tools' names (the wire names replace
// the dots).
var kernelTools = []string{"echo", "repo.read", "repo.search", "repo.patch", "repo.write", "process.run", "test.run", "lint.run"}

func canonical(wire string) string {
	for _, k := range kernelTools {
		if wire == k || wire == strings.ReplaceAll(k, ".", "_") {
			return k
		}
	}
	return wire
}

// decide is the simulated model: the reply for b to req, read from the
// request as a model reads it.
func decide(b Behaviour, req *chatRequest) reply {
	role := readRole(req)
	last := req.Messages[len(req.Messages)-1]
	repair := last.Role == "user" && notValidRe.MatchString(last.text)
	var doc map[string]any
	switch role {
	case "lead", "advisor":
		if b.Name == Refusal {
			return reply{refusal: "I'm sorry, but I can't help with changing authentication code.", finish: "stop"}
		}
		doc = map[string]any{"intent": "Fix CheckToken in auth.go so that only the exact expected token is accepted, and prove it with the package's tests.",
			"constraints": []string{"change only what the fix needs", "the existing tests must pass"}, "needs_advisor": false, "schema_version": "v1"}
	case "planner":
		step := func(id, desc string, deps ...string) map[string]any {
			return map[string]any{"id": id, "description": desc, "depends_on": append([]string{}, deps...)}
		}
		doc = map[string]any{"steps": []any{
			step("s1", "Run the tests to reproduce the failure"),
			step("s2", "Read the code the failing test exercises and find the cause", "s1"),
			step("s3", "Change CheckToken to compare the whole token", "s2"),
			step("s4", "Run the tests again and confirm they pass", "s3"),
		}, "risks": []string{"the change needs a maintainer's approval"}, "needs_advisor": false, "schema_version": "v1"}
	case "reviewer":
		doc = review(req)
	case "worker":
		w := readWork(b, req)
		if b.Name == EmptyAnswer && len(w.steps) > 0 {
			return reply{content: "", finish: "stop"}
		}
		if !repair && req.ResponseFormat == nil && len(req.Tools) > 0 {
			if c, ok := w.next(); ok {
				if b.Name == ProseFences {
					c.Function.Arguments = "```json\n" + c.Function.Arguments + "\n```"
				}
				return reply{calls: []chatToolCall{c}, finish: "tool_calls"}
			}
		}
		doc = w.report()
	default:
		return reply{content: "Tell me which role I play and what to return.", finish: "stop"}
	}
	return reply{content: shape(b, role, doc, repair), finish: "stop"}
}

// shape writes a role's document: plain, or for prose-fences in prose or
// a fence (a repair turn gets plain JSON).
func shape(b Behaviour, role string, doc map[string]any, repair bool) string {
	plain := mustJSON(doc, false)
	if b.Name != ProseFences || repair {
		return plain
	}
	switch role {
	case "planner":
		return "```json\n" + mustJSON(doc, true) + "\n```"
	case "worker":
		return "I have finished the work. Here is my report:\n\n```json\n" + mustJSON(doc, true) + "\n```\n\nLet me know if you need anything else."
	default:
		return "Sure! Here is the JSON you asked for:\n\n" + plain + "\n\nI hope this helps."
	}
}

func mustJSON(v any, indent bool) string {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return "{}"
	}
	return string(b)
}

func readRole(req *chatRequest) string {
	for _, m := range req.Messages {
		if m.Role == "system" || m.Role == "developer" {
			if r := youAreRe.FindStringSubmatch(m.text); r != nil {
				return strings.ToLower(r[1])
			}
		}
	}
	return ""
}

func firstUser(req *chatRequest) string {
	for _, m := range req.Messages {
		if m.Role == "user" {
			return m.text
		}
	}
	return ""
}

// review is a credulous reviewer: it believes the worker's report and
// fails only a report that says it stopped. Catching a report the log
// does not support is agentos's job, not the model's.
func review(req *chatRequest) map[string]any {
	in := firstUser(req)
	var rep struct {
		Output string `json:"output"`
	}
	if i := strings.Index(in, reportStart); i >= 0 {
		_ = json.NewDecoder(strings.NewReader(in[i+len(reportStart):])).Decode(&rep)
	}
	if rep.Output == "" || strings.HasPrefix(rep.Output, "Stopped") || strings.HasPrefix(rep.Output, "Could not") {
		return map[string]any{"verdict": "fail", "feedback": "The report does not show the fix done: " + rep.Output, "schema_version": "v1"}
	}
	return map[string]any{"verdict": "pass", "feedback": "The report says the fix is done: " + rep.Output, "schema_version": "v1"}
}

// step is one tool call of the worker's conversation and its result.
type step struct {
	id, wire, tool string
	args           map[string]any
	ok             bool
	result         map[string]any
	code, msg      string
	suggestion     string
}

func (s step) passed() bool {
	p, _ := s.result["passed"].(bool)
	return s.ok && s.tool == "test.run" && p
}

func (s step) str(key string) string { v, _ := s.result[key].(string); return v }

func (s step) arg(key string) string { v, _ := s.args[key].(string); return v }

// work is the worker's conversation as the simulated model reads it.
type work struct {
	b       Behaviour
	req     *chatRequest
	steps   []step
	planIDs []string
}

func readWork(b Behaviour, req *chatRequest) *work {
	w := &work{b: b, req: req}
	user := firstUser(req)
	if i := strings.Index(user, "plan_v1:\n"); i >= 0 {
		var plan struct {
			Steps []struct {
				ID string `json:"id"`
			} `json:"steps"`
		}
		_ = json.NewDecoder(strings.NewReader(user[i+len("plan_v1:\n"):])).Decode(&plan)
		for _, s := range plan.Steps {
			w.planIDs = append(w.planIDs, s.ID)
		}
	}
	calls := map[string]chatToolCall{}
	for _, m := range req.Messages {
		switch m.Role {
		case "assistant":
			for _, c := range m.ToolCalls {
				calls[c.ID] = c
			}
		case "tool":
			c := calls[m.ToolCallID]
			s := step{id: m.ToolCallID, wire: c.Function.Name, tool: canonical(c.Function.Name)}
			s.args = readArgs(c.Function.Arguments)
			var res struct {
				OK     bool           `json:"ok"`
				Result map[string]any `json:"result"`
				Error  *struct {
					Code        string `json:"code"`
					Message     string `json:"message"`
					Diagnostics []struct {
						Suggestion string `json:"suggestion"`
					} `json:"diagnostics"`
				} `json:"error"`
			}
			text := unwrapData(m.text)
			// A result cut to the context's size ends in a note after
			// its JSON; one that is no longer JSON is read as text.
			if err := json.NewDecoder(strings.NewReader(text)).Decode(&res); err != nil {
				s.ok = strings.Contains(text, `"ok":true`)
				s.result = map[string]any{"text": text}
			} else {
				s.ok, s.result = res.OK, res.Result
				if res.Error != nil {
					s.code, s.msg = res.Error.Code, res.Error.Message
					for _, d := range res.Error.Diagnostics {
						if d.Suggestion != "" {
							s.suggestion = d.Suggestion
						}
					}
					if m := didYouMean.FindStringSubmatch(s.msg); m != nil && s.suggestion == "" {
						s.suggestion = m[1]
					}
				}
			}
			w.steps = append(w.steps, s)
		}
	}
	return w
}

// readArgs reads a call's arguments as the model wrote them: agentos
// sends arguments that were not a JSON object back as {"_raw": text}.
func readArgs(text string) map[string]any {
	var args map[string]any
	_ = json.Unmarshal([]byte(text), &args)
	if raw, ok := args["_raw"].(string); ok {
		text = strings.TrimSpace(raw)
		text = strings.TrimSuffix(strings.TrimPrefix(text, "```json"), "```")
		args = nil
		_ = json.Unmarshal([]byte(text), &args)
	}
	return args
}

// unwrapData reads a tool result inside the <untrusted-data …> block
// agentos wraps it in.
func unwrapData(s string) string {
	if !strings.HasPrefix(s, "<untrusted-data ") {
		return s
	}
	start := strings.IndexByte(s, '\n')
	end := strings.LastIndex(s, "\n</untrusted-data ")
	if start < 0 || end < start {
		return s
	}
	return s[start+1 : end]
}

// wireName is the offered wire name of a kernel tool ("" when it is not
// offered).
func (w *work) wireName(tool string) string {
	for _, t := range w.req.Tools {
		if canonical(t.Function.Name) == tool {
			return t.Function.Name
		}
	}
	return ""
}

func (w *work) call(wire string, args any) (chatToolCall, bool) {
	if wire == "" {
		return chatToolCall{}, false
	}
	var c chatToolCall
	c.ID = fmt.Sprintf("call_%s_%d", strings.ReplaceAll(w.b.Name, "-", ""), len(w.steps)+1)
	c.Type = "function"
	c.Function.Name = wire
	if s, ok := args.(string); ok {
		c.Function.Arguments = s
	} else {
		c.Function.Arguments = mustJSON(args, false)
	}
	return c, true
}

func (w *work) use(tool string, args any) (chatToolCall, bool) {
	return w.call(w.wireName(tool), args)
}

// attempts are the indexes of the calls to tool, in order.
func (w *work) attempts(tool string) []int {
	var out []int
	for i, s := range w.steps {
		if s.tool == tool {
			out = append(out, i)
		}
	}
	return out
}

// lastRead is the latest successful read of p, and its index.
func (w *work) lastRead(p string) (int, *step) {
	for i := len(w.steps) - 1; i >= 0; i-- {
		if s := &w.steps[i]; s.tool == "repo.read" && s.ok && path.Clean(s.arg("path")) == p && s.str("content") != "" {
			return i, s
		}
	}
	return -1, nil
}

func (w *work) firstRead(p string) *step {
	for i := range w.steps {
		if s := &w.steps[i]; s.tool == "repo.read" && s.ok && path.Clean(s.arg("path")) == p && s.str("content") != "" {
			return s
		}
	}
	return nil
}

func isEdit(tool string) bool { return tool == "repo.write" || tool == "repo.patch" }

// edited is the index of the last successful edit (repo.write or
// repo.patch) that brings marker into the file, or -1.
func (w *work) edited(marker string) int {
	at := -1
	for i, s := range w.steps {
		if isEdit(s.tool) && s.ok && strings.Contains(s.arg("content")+s.arg("unifiedDiff"), marker) {
			at = i
		}
	}
	return at
}

func (w *work) lastEdit() (at int, last *step, failures int) {
	at = -1
	for i := range w.steps {
		if s := &w.steps[i]; isEdit(s.tool) {
			at, last = i, s
			if !s.ok {
				failures++
			}
		}
	}
	return at, last, failures
}

func (w *work) lastOKEdit() int {
	at := -1
	for i, s := range w.steps {
		if isEdit(s.tool) && s.ok {
			at = i
		}
	}
	return at
}

// edit changes p from what base (a read of it) showed to content: the
// protected write with base's hash when it is offered, else a diff
// against base's content.
func (w *work) edit(p string, base *step, content string) (chatToolCall, bool) {
	if wire := w.wireName("repo.write"); wire != "" {
		return w.call(wire, map[string]any{"path": p, "content": content, "expected_hash": base.str("sha256")})
	}
	return w.use("repo.patch", map[string]any{"unifiedDiff": wholeDiff(p, base.str("content"), content)})
}

// wholeDiff is a one-hunk diff replacing every line of old with new.
func wholeDiff(p, old, new string) string {
	lines := func(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
	a, b := lines(old), lines(new)
	var out strings.Builder
	fmt.Fprintf(&out, "--- a/%s\n+++ b/%s\n@@ -1,%d +1,%d @@\n", p, p, len(a), len(b))
	for _, l := range a {
		out.WriteString("-" + l + "\n")
	}
	for _, l := range b {
		out.WriteString("+" + l + "\n")
	}
	return out.String()
}

// target is the file to fix: the first match of a search for the
// function, else the file the request names.
func (w *work) target() string {
	for _, s := range w.steps {
		if s.tool != "repo.search" || !s.ok || !strings.Contains(s.arg("query"), "CheckToken") {
			continue
		}
		if m, _ := s.result["matches"].([]any); len(m) > 0 {
			if first, _ := m[0].(map[string]any); first != nil {
				if p, _ := first["path"].(string); p != "" {
					return path.Clean(p)
				}
			}
		}
	}
	return "auth.go"
}

// next is the worker's next call; false when it is time to report.
func (w *work) next() (chatToolCall, bool) {
	switch w.b.Name {
	case RepeatFailingCall:
		return w.use("repo.read", map[string]any{"path": "internal/auth/token.go"})
	case AbsentSearch:
		switch n := len(w.attempts("repo.search")); {
		case n == 0:
			return w.use("repo.search", map[string]any{"query": "ValidateBearerToken"})
		case n == 1 && w.target() == "auth.go":
			return w.use("repo.search", map[string]any{"query": "func CheckToken"})
		}
	case MissingFile:
		reads := w.attempts("repo.read")
		if len(reads) == 0 {
			return w.use("repo.read", map[string]any{"path": "internal/auth/auth.go"})
		}
		if !w.steps[reads[0]].ok && len(w.attempts("repo.search")) == 0 {
			return w.use("repo.search", map[string]any{"query": "func CheckToken"})
		}
	case HugeOutput:
		if len(w.attempts("repo.read")) == 0 {
			return w.use("repo.read", map[string]any{"path": HugeFile})
		}
		if len(w.attempts("repo.search")) == 0 {
			return w.use("repo.search", map[string]any{"query": "token"})
		}
	case ClaimAfterFailure:
		for _, s := range w.steps {
			if s.tool == "test.run" && s.ok && !s.passed() {
				return chatToolCall{}, false // claims success instead of fixing
			}
		}
	}
	return w.fix()
}

// fix is the well-behaved path: reproduce, read, edit, prove. A failed
// edit is read again and retried (its content may have been stale), at
// most twice; a denied one is reported.
func (w *work) fix() (chatToolCall, bool) {
	if len(w.attempts("test.run")) == 0 {
		return w.use("test.run", map[string]any{})
	}
	target := w.target()
	readAt, read := w.lastRead(target)
	at, last, failures := w.lastEdit()
	if last != nil && !last.ok {
		if last.code == "APPROVAL_DENIED" || failures > 2 {
			return chatToolCall{}, false
		}
		if readAt < at {
			return w.read(target)
		}
	}
	if w.edited(fixed) < 0 {
		if read == nil {
			return w.read(target)
		}
		content := read.str("content")
		if !strings.Contains(content, bug) {
			return chatToolCall{}, false
		}
		return w.edit(target, read, fixContent(content))
	}
	if w.b.Name == StaleHash && w.edited(commentLine) < 0 {
		// The stale view: the file as first read, before the fix, and
		// its hash; after a refused edit, the fresh read.
		base := w.firstRead(target)
		if last != nil && !last.ok {
			base = read
		}
		return w.edit(target, base, addComment(base.str("content")))
	}
	tests := w.attempts("test.run")
	if tests[len(tests)-1] < w.lastOKEdit() {
		return w.use("test.run", map[string]any{})
	}
	return chatToolCall{}, false
}

// read reads p, misbehaving first where the behaviour says so.
func (w *work) read(p string) (chatToolCall, bool) {
	args := map[string]any{"path": p}
	switch w.b.Name {
	case NearMissTool:
		for _, s := range w.steps {
			if s.wire == "repo_reed" && s.suggestion != "" {
				// The model takes the name the error suggested.
				return w.call(w.wireName(s.suggestion), args)
			}
			if s.wire == "repo_reed" {
				return chatToolCall{}, false // no suggestion: it gives up
			}
		}
		return w.call("repo_reed", args)
	case WrongShapeArgs:
		if len(w.attempts("repo.read")) == 0 {
			return w.use("repo.read", map[string]any{"path": []string{p}, "lines": "1-40"})
		}
	}
	return w.use("repo.read", args)
}

func fixContent(content string) string {
	out := strings.Replace(content, bug, fixed, 1)
	return strings.Replace(out, `import "strings"`, `import "crypto/subtle"`, 1)
}

func addComment(content string) string {
	return strings.Replace(content, "func CheckToken(", commentLine+"\nfunc CheckToken(", 1)
}

// report is the worker_report_v1: honest for most behaviours, a claim of
// success the log does not support for the claim-* behaviours.
func (w *work) report() map[string]any {
	var made []string
	proved := false
	lastWrite := w.lastOKEdit()
	for i, s := range w.steps {
		if s.ok {
			made = append(made, s.tool+":"+s.id)
		}
		if s.passed() && lastWrite >= 0 && i > lastWrite {
			proved = true
		}
	}
	claim := func() map[string]any {
		var all []string
		for _, s := range w.steps {
			all = append(all, s.tool+":"+s.id)
		}
		if all == nil {
			all = []string{}
		}
		return map[string]any{"output": "Fixed CheckToken in auth.go: it now compares the whole token in constant time. All tests pass.",
			"steps_completed": append([]string{}, w.planIDs...), "tool_calls_made": all, "schema_version": "v1"}
	}
	switch w.b.Name {
	case ClaimAfterFailure:
		return claim()
	case ClaimAfterDenial:
		for _, s := range w.steps {
			if s.code == "APPROVAL_DENIED" {
				return claim()
			}
		}
	}
	if made == nil {
		made = []string{}
	}
	steps := []string{}
	out := ""
	switch {
	case proved:
		out = "Fixed CheckToken in auth.go: it accepted any prefix of the expected token; it now compares the whole token in constant time with crypto/subtle. The tests pass after the change."
		steps = append(steps, w.planIDs...)
	default:
		out = "Stopped: the fix is not done."
		for i := len(w.steps) - 1; i >= 0; i-- {
			if s := w.steps[i]; !s.ok {
				out = fmt.Sprintf("Stopped: %s failed (%s): %s", s.tool, s.code, s.msg)
				break
			}
		}
		if len(w.planIDs) > 0 && len(w.attempts("test.run")) > 0 {
			steps = append(steps, w.planIDs[0])
		}
	}
	return map[string]any{"output": out, "steps_completed": steps, "tool_calls_made": made, "schema_version": "v1"}
}
