package fakemodel

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// answer is what the fake model says: text, tool calls, or both.
type answer struct {
	role    string
	content string
	calls   []chatToolCall
	finish  string
}

// Roles and the schema each returns.
var roleSchema = map[string]string{
	"lead": "lead_directive_v1", "advisor": "lead_directive_v1", "planner": "plan_v1",
	"worker": "worker_report_v1", "reviewer": "review_result_v1",
}

// roleIndex orders the roles for the reply-shape rotation.
var roleIndex = map[string]int64{"lead": 0, "planner": 1, "worker": 2, "reviewer": 3, "advisor": 4}

var (
	youAreRe    = regexp.MustCompile(`(?i)\byou are the (lead|planner|worker|reviewer|advisor)\b`)
	returnsRe   = regexp.MustCompile(`Return JSON matching (\w+_v1)`)
	notValidRe  = regexp.MustCompile(`not valid (\w+_v1)`)
	testFileRe  = regexp.MustCompile(`([\w./-]+)_test\.go:\d+`)
	goFileRe    = regexp.MustCompile(`\b([\w./-]+\.go)\b`)
	userAskedRe = regexp.MustCompile(`(?s)User request:\n(.*?)(\n\n|$)`)
)

// readRole finds which role the request is for: the schema response_format
// names, the system prompt's "You are the X", or the schema it says to
// return.
func readRole(req *chatRequest) string {
	system := systemText(req)
	if m := youAreRe.FindStringSubmatch(system); m != nil {
		return strings.ToLower(m[1])
	}
	schema := ""
	if f := req.ResponseFormat; f != nil && f.JSONSchema != nil {
		schema = f.JSONSchema.Name
	} else if m := returnsRe.FindStringSubmatch(system); m != nil {
		schema = m[1]
	} else if strings.Contains(system, "lead_directive_v1") {
		schema = "lead_directive_v1"
	}
	for _, r := range []string{"lead", "planner", "worker", "reviewer"} {
		if roleSchema[r] == schema {
			return r
		}
	}
	return ""
}

func systemText(req *chatRequest) string {
	var b strings.Builder
	for _, m := range req.Messages {
		if m.Role == "system" || m.Role == "developer" {
			b.WriteString(m.text)
			b.WriteString("\n")
		}
	}
	return b.String()
}

func firstUser(req *chatRequest) string {
	for _, m := range req.Messages {
		if m.Role == "user" {
			return m.text
		}
	}
	return ""
}

// answer decides the reply.
func (s *Server) answer(req *chatRequest) answer {
	role := readRole(req)
	if role == "" {
		return answer{role: "unknown", content: "I can help once you tell me which role I play and what to return.", finish: "stop"}
	}
	last := req.Messages[len(req.Messages)-1]
	repair := last.Role == "user" && notValidRe.MatchString(last.text)
	noTools := len(req.Tools) == 0 || strings.Trim(string(req.ToolChoice), `" `) == "none"
	var doc map[string]any
	switch role {
	case "lead":
		doc = leadDoc(firstUser(req))
	case "advisor":
		doc = advisorDoc(firstUser(req))
	case "planner":
		doc = planDoc(firstUser(req))
	case "reviewer":
		doc = reviewDoc(firstUser(req))
	case "worker":
		w := readWork(req)
		if !repair && !noTools {
			if call, ok := w.next(req); ok {
				return answer{role: role, calls: []chatToolCall{call}, finish: "tool_calls"}
			}
		}
		doc = w.report(firstUser(req))
	}
	honoured := req.ResponseFormat != nil && req.ResponseFormat.Type == "json_schema" && !s.o.IgnoreResponseFormat
	return answer{role: role, content: s.shape(role, doc, repair || honoured), finish: "stop"}
}

// shape writes a role's JSON document: plain when the format is honoured or
// when repairing; otherwise (IgnoreResponseFormat) in the shape the seed
// gives this role.
func (s *Server) shape(role string, doc map[string]any, plain bool) string {
	if plain || !s.o.IgnoreResponseFormat {
		return mustJSON(doc, false)
	}
	switch ((s.o.Seed+roleIndex[role])%4 + 4) % 4 {
	case 1:
		return "```json\n" + mustJSON(doc, true) + "\n```"
	case 2:
		return "Here is the " + roleSchema[role] + " you asked for:\n\n" + mustJSON(doc, false) + "\n\nLet me know if anything should change."
	case 3:
		// Drift: the document misses a required member.
		delete(doc, "schema_version")
		return mustJSON(doc, false)
	default:
		return mustJSON(doc, false)
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

// firstObject returns the first balanced JSON object in text after marker
// ("" for the first anywhere).
func firstObject(text, marker string) map[string]any {
	if marker != "" {
		i := strings.Index(text, marker)
		if i < 0 {
			return nil
		}
		text = text[i+len(marker):]
	}
	for start := strings.IndexByte(text, '{'); start >= 0; {
		dec := json.NewDecoder(strings.NewReader(text[start:]))
		var m map[string]any
		if err := dec.Decode(&m); err == nil {
			return m
		}
		next := strings.IndexByte(text[start+1:], '{')
		if next < 0 {
			return nil
		}
		start += 1 + next
	}
	return nil
}

func leadDoc(user string) map[string]any {
	asked := strings.TrimSpace(user)
	if m := userAskedRe.FindStringSubmatch(user); m != nil {
		asked = strings.TrimSpace(m[1])
	}
	if asked == "" {
		asked = "the request"
	}
	intent := strings.ToUpper(asked[:1]) + asked[1:]
	if !strings.HasSuffix(intent, ".") {
		intent += "."
	}
	constraints := []string{"change only what the request needs"}
	if isFix(asked) {
		intent = strings.TrimSuffix(intent, ".") + ", and prove the fix with the project's tests."
		constraints = append(constraints, "the existing tests must pass")
	}
	return map[string]any{"intent": intent, "constraints": constraints, "needs_advisor": false, "schema_version": "v1"}
}

func advisorDoc(user string) map[string]any {
	d := firstObject(user, "Lead directive:")
	if d == nil {
		return leadDoc(user)
	}
	d["needs_advisor"] = false
	d["schema_version"] = "v1"
	return d
}

func isFix(s string) bool {
	s = strings.ToLower(s)
	for _, w := range []string{"fix", "bug", "fail", "broken"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func planDoc(user string) map[string]any {
	d := firstObject(user, "lead_directive_v1")
	intent, _ := d["intent"].(string)
	if intent == "" {
		intent = strings.TrimSpace(user)
	}
	step := func(id, desc string, deps ...string) map[string]any {
		if deps == nil {
			deps = []string{}
		}
		return map[string]any{"id": id, "description": desc, "depends_on": deps}
	}
	steps := []any{step("s1", intent)}
	risks := []string{"the request may need more context than the repository gives"}
	if isFix(intent) {
		steps = []any{
			step("s1", "Run the tests to reproduce the failure"),
			step("s2", "Read the code the failing test exercises and find the cause", "s1"),
			step("s3", "Patch the cause with the smallest change", "s2"),
			step("s4", "Run the tests again and confirm they pass", "s3"),
		}
		risks = []string{"the patch needs a maintainer's approval before it is applied"}
	}
	return map[string]any{"steps": steps, "risks": risks, "needs_advisor": false, "schema_version": "v1"}
}

func reviewDoc(user string) map[string]any {
	plan := firstObject(user, "plan_v1:")
	report := firstObject(user, "worker_report_v1")
	verdict, feedback := "pass", ""
	done := map[string]bool{}
	if report != nil {
		if l, ok := report["steps_completed"].([]any); ok {
			for _, s := range l {
				if id, ok := s.(string); ok {
					done[id] = true
				}
			}
		}
	}
	var missing []string
	if steps, ok := plan["steps"].([]any); ok {
		for _, st := range steps {
			if m, ok := st.(map[string]any); ok {
				if id, _ := m["id"].(string); id != "" && !done[id] {
					missing = append(missing, id)
				}
			}
		}
	}
	out, _ := report["output"].(string)
	switch {
	case report == nil:
		verdict, feedback = "fail", "There is no worker report to review."
	case len(missing) > 0:
		verdict, feedback = "fail", "Plan steps not completed: "+strings.Join(missing, ", ")+". "+out
	case out == "" || strings.HasPrefix(out, "Stopped") || strings.HasPrefix(out, "Could not"):
		verdict, feedback = "fail", "The report does not show the intent achieved: "+out
	default:
		feedback = "Every plan step is reported done and the output addresses the intent: " + out
	}
	return map[string]any{"verdict": verdict, "feedback": feedback, "schema_version": "v1"}
}

// work is what the worker conversation shows: the calls made and their
// outcomes, in order.
type work struct {
	steps   []outcome
	planIDs []string
}

type outcome struct {
	id, tool string // canonical tool name (repo.read)
	args     map[string]any
	ok       bool
	result   map[string]any
	errCode  string
	errMsg   string
}

// canonical turns a wire tool name back into the kernel's dotted name for
// the tools the fake knows.
func canonical(wire string) string {
	for _, n := range []string{"test.run", "repo.read", "repo.patch", "repo.search", "lint.run"} {
		if wire == n || wire == strings.ReplaceAll(n, ".", "_") {
			return n
		}
	}
	return wire
}

func readWork(req *chatRequest) *work {
	w := &work{}
	if plan := firstObject(firstUser(req), "plan_v1:"); plan != nil {
		if steps, ok := plan["steps"].([]any); ok {
			for _, st := range steps {
				if m, ok := st.(map[string]any); ok {
					if id, _ := m["id"].(string); id != "" {
						w.planIDs = append(w.planIDs, id)
					}
				}
			}
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
			o := outcome{id: m.ToolCallID, tool: canonical(c.Function.Name)}
			_ = json.Unmarshal([]byte(c.Function.Arguments), &o.args)
			var res struct {
				Tool   string         `json:"tool"`
				OK     bool           `json:"ok"`
				Result map[string]any `json:"result"`
				Error  *struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			text := unwrapData(m.text)
			if err := json.Unmarshal([]byte(text), &res); err != nil {
				o.ok, o.result = true, map[string]any{"text": text}
			} else {
				if res.Tool != "" {
					o.tool = res.Tool
				}
				o.ok, o.result = res.OK, res.Result
				if res.Error != nil {
					o.errCode, o.errMsg = res.Error.Code, res.Error.Message
				}
			}
			w.steps = append(w.steps, o)
		}
	}
	return w
}

func (o outcome) passed() bool {
	if p, ok := o.result["passed"].(bool); ok {
		return p
	}
	code, ok := o.result["exit_code"].(float64)
	return ok && code == 0
}

func (o outcome) output() string {
	var b strings.Builder
	for _, k := range []string{"stdout", "stderr", "output"} {
		if s, ok := o.result[k].(string); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}

// next is the worker's next tool call, decided from the outcomes so far;
// false when it is time to report.
func (w *work) next(req *chatRequest) (chatToolCall, bool) {
	if _, failed := w.failure(); failed {
		return chatToolCall{}, false
	}
	tests := w.indexes("test.run")
	if len(tests) == 0 {
		return w.call(req, "test.run", map[string]any{})
	}
	if p := w.lastPatch(); p >= 0 {
		if tests[len(tests)-1] < p {
			return w.call(req, "test.run", map[string]any{})
		}
		return chatToolCall{}, false
	}
	last := w.steps[tests[len(tests)-1]]
	if last.passed() {
		return chatToolCall{}, false
	}
	target := w.target(req, last)
	if target == "" {
		return chatToolCall{}, false
	}
	content, read := w.content(target)
	if !read {
		return w.call(req, "repo.read", map[string]any{"path": target})
	}
	diff, ok := fix(target, content)
	if !ok {
		return chatToolCall{}, false
	}
	return w.call(req, "repo.patch", map[string]any{"unifiedDiff": diff})
}

func (w *work) indexes(tool string) []int {
	var out []int
	for i, o := range w.steps {
		if o.tool == tool && o.ok {
			out = append(out, i)
		}
	}
	return out
}

func (w *work) lastPatch() int {
	p := w.indexes("repo.patch")
	if len(p) == 0 {
		return -1
	}
	return p[len(p)-1]
}

// failure is the first outcome that stops the work: a refused or failed
// patch or read.
func (w *work) failure() (outcome, bool) {
	for _, o := range w.steps {
		if !o.ok && o.tool != "test.run" {
			return o, true
		}
	}
	return outcome{}, false
}

// target is the file to read: the source file of the failing test, else
// the first Go file the task names.
func (w *work) target(req *chatRequest, failing outcome) string {
	if m := testFileRe.FindStringSubmatch(failing.output()); m != nil {
		return path.Clean(m[1] + ".go")
	}
	for _, m := range goFileRe.FindAllStringSubmatch(firstUser(req), -1) {
		if !strings.HasSuffix(m[1], "_test.go") {
			return m[1]
		}
	}
	return ""
}

func (w *work) content(p string) (string, bool) {
	for _, i := range w.indexes("repo.read") {
		o := w.steps[i]
		if ap, _ := o.args["path"].(string); path.Clean(ap) == p {
			c, _ := o.result["content"].(string)
			return c, true
		}
	}
	return "", false
}

func (w *work) call(req *chatRequest, tool string, args map[string]any) (chatToolCall, bool) {
	wire := ""
	for _, t := range req.Tools {
		if canonical(t.Function.Name) == tool {
			wire = t.Function.Name
		}
	}
	if wire == "" {
		return chatToolCall{}, false // not offered: report instead
	}
	var c chatToolCall
	c.ID = "call_" + digest(render(req))[:24]
	c.Type = "function"
	c.Function.Name = wire
	c.Function.Arguments = mustJSON(args, false)
	return c, true
}

// report is the worker_report_v1 the outcomes support: never a step or a
// call that did not happen.
func (w *work) report(user string) map[string]any {
	var made []string
	reproduced, read, patched, proved := false, false, false, false
	patchAt := w.lastPatch()
	for i, o := range w.steps {
		if o.ok {
			// Only calls that succeeded: agentos checks each claimed call
			// against the log's results.
			made = append(made, o.tool+":"+o.id)
		}
		switch {
		case o.tool == "test.run" && o.ok && patchAt >= 0 && i > patchAt:
			proved = o.passed()
		case o.tool == "test.run" && o.ok:
			reproduced = true
		case o.tool == "repo.read" && o.ok:
			read = true
		case o.tool == "repo.patch" && o.ok:
			patched = true
		}
	}
	if made == nil {
		made = []string{}
	}
	n := 0
	for _, b := range []bool{reproduced, read, patched, proved} {
		if !b {
			break
		}
		n++
	}
	var out string
	switch f, failed := w.failure(); {
	case failed:
		out = fmt.Sprintf("Stopped: %s failed (%s): %s", f.tool, f.errCode, f.errMsg)
	case proved:
		out = "Fixed CheckToken in auth.go: it accepted any prefix of the expected token (strings.HasPrefix), including the empty string; it now compares the whole token in constant time with crypto/subtle.ConstantTimeCompare. The tests pass."
		n = len(w.planIDs)
	case patched:
		out = "Stopped: the tests still fail after the patch."
	case reproduced && len(w.steps) > 0 && w.steps[len(w.steps)-1].tool == "test.run" && w.steps[len(w.steps)-1].passed():
		out = "Nothing to fix: the tests already pass."
		n = len(w.planIDs)
	case len(w.steps) == 0:
		out = "Could not start: no tool to run the tests was offered."
	default:
		out = "Could not determine a fix from what the tools returned."
	}
	ids := append([]string(nil), w.planIDs[:min(n, len(w.planIDs))]...)
	if ids == nil {
		ids = []string{}
	}
	return map[string]any{"output": out, "steps_completed": ids, "tool_calls_made": made, "schema_version": "v1"}
}

// fix writes the patch for the bug the fake model knows: a token check that
// accepts any prefix. false when the file holds no such bug.
func fix(file, content string) (string, bool) {
	const bug = "strings.HasPrefix(expected, given)"
	if !strings.Contains(content, bug) {
		return "", false
	}
	fixed := strings.Replace(content, bug, "subtle.ConstantTimeCompare([]byte(given), []byte(expected)) == 1", 1)
	switch rest := strings.Replace(fixed, `"strings"`, "", 1); {
	case strings.Contains(fixed, `import "strings"`) && !strings.Contains(rest, "strings."):
		fixed = strings.Replace(fixed, `import "strings"`, `import "crypto/subtle"`, 1)
	case strings.Contains(fixed, `import "strings"`):
		fixed = strings.Replace(fixed, `import "strings"`, "import (\n\t\"crypto/subtle\"\n\t\"strings\"\n)", 1)
	case strings.Contains(fixed, "\t\"strings\"\n") && !strings.Contains(rest, "strings."):
		fixed = strings.Replace(fixed, "\t\"strings\"\n", "\t\"crypto/subtle\"\n", 1)
	default:
		fixed = strings.Replace(fixed, "import (\n", "import (\n\t\"crypto/subtle\"\n", 1)
	}
	return unifiedDiff(file, content, fixed), true
}

// unifiedDiff is a one-hunk git-style diff of the whole file.
func unifiedDiff(file, old, new string) string {
	split := func(s string) ([]string, bool) {
		nl := strings.HasSuffix(s, "\n")
		s = strings.TrimSuffix(s, "\n")
		if s == "" {
			return nil, nl
		}
		return strings.Split(s, "\n"), nl
	}
	a, aNL := split(old)
	b, bNL := split(new)
	var out strings.Builder
	fmt.Fprintf(&out, "--- a/%s\n+++ b/%s\n@@ -1,%d +1,%d @@\n", file, file, len(a), len(b))
	// A line-level diff by longest common subsequence: small files only.
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	line := func(prefix, s string, last, nl bool) {
		out.WriteString(prefix + s + "\n")
		if last && !nl {
			out.WriteString("\\ No newline at end of file\n")
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			line(" ", a[i], i == len(a)-1, aNL && bNL)
			i++
			j++
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			line("-", a[i], i == len(a)-1, aNL)
			i++
		default:
			line("+", b[j], j == len(b)-1, bNL)
			j++
		}
	}
	return out.String()
}

// unwrapData reads a tool result as a model does: inside the
// <untrusted-data …> block agentos wraps it in.
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
