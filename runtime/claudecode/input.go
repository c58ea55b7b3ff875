package claudecode

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/agentos/agentos/kernel/patch"
)

// ToolInputs returns the tool_input objects a Claude Code hook sees for an
// agentos call: the call's own arguments with Claude Code's fields for the
// mapped tool added next to them (never replacing one of ours), file paths
// absolute under root as Claude Code gives them. A repo.patch that touches
// several files yields one object per file, as Claude Code would make one
// Edit call per file, so that a hook checking file_path sees every file.
// added lists the keys that were added (the same for every object), which
// a hook's updatedInput must not change: agentos cannot map them back.
// Tools without a Claude Code counterpart get their arguments unchanged.
// Each Shown also names the Claude Code tool the object is shaped for
// ("" for a tool Claude Code has no name for).
func ToolInputs(root, tool string, args json.RawMessage) (inputs []Shown, added []string, err error) {
	var ours map[string]any
	if err := json.Unmarshal(args, &ours); err != nil || ours == nil {
		return []Shown{{Name: mcpName(tool), Input: args}}, nil, nil
	}
	var extras []map[string]any
	var names []string
	switch tool {
	case "process.run":
		// Bash's tool_input is {command, description, timeout}; command is
		// the same field in both.
		extras, names = []map[string]any{{}}, []string{"Bash"}
	case "repo.read":
		p, _ := ours["path"].(string)
		e := map[string]any{"file_path": abs(root, p)}
		if r, ok := ours["range"].([]any); ok && len(r) == 2 {
			start, ok1 := r[0].(float64)
			end, ok2 := r[1].(float64)
			if ok1 && ok2 && end >= start {
				e["offset"], e["limit"] = int(start), int(end-start+1)
			}
		}
		extras, names = []map[string]any{e}, []string{"Read"}
	case "repo.write":
		p, _ := ours["path"].(string)
		extras, names = []map[string]any{{"file_path": abs(root, p)}}, []string{"Write"}
	case "repo.search":
		extras, names = []map[string]any{grepInput(root, ours)}, []string{"Grep"}
	case "repo.patch":
		diff, _ := ours["unifiedDiff"].(string)
		files, perr := patch.Parse(diff)
		if perr != nil {
			return nil, nil, fmt.Errorf("repo.patch: the diff cannot be shown in Claude Code's shape: %w", perr)
		}
		if len(files) == 0 {
			return nil, nil, fmt.Errorf("repo.patch: the diff changes no file")
		}
		for _, f := range files {
			for _, e := range editInputs(root, f) {
				extras, names = append(extras, e), append(names, editName(e))
			}
		}
	default:
		return []Shown{{Name: mcpName(tool), Input: args}}, nil, nil
	}
	keys := map[string]bool{}
	for i, e := range extras {
		m := make(map[string]any, len(ours)+len(e))
		for k, v := range ours {
			m[k] = v
		}
		for k, v := range e {
			if _, taken := ours[k]; taken {
				continue
			}
			m[k] = v
			keys[k] = true
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, nil, err
		}
		inputs = append(inputs, Shown{Name: names[i], Input: b})
	}
	for k := range keys {
		added = append(added, k)
	}
	sort.Strings(added)
	return inputs, added, nil
}

// Shown is one tool_input a hook sees, and the Claude Code tool it is
// shaped for.
type Shown struct {
	Name  string
	Input json.RawMessage
}

// mcpName is Claude Code's name of an MCP tool, "" for any other tool.
func mcpName(tool string) string {
	if rest, ok := strings.CutPrefix(tool, "mcp."); ok {
		if server, t, ok := strings.Cut(rest, "."); ok && server != "" && t != "" {
			return mcpPrefix + server + "__" + t
		}
	}
	return ""
}

// editName is the Claude Code tool one file of a patch looks like: Write
// for a new file, Edit for one change, MultiEdit otherwise.
func editName(e map[string]any) string {
	if _, ok := e["content"]; ok {
		return "Write"
	}
	if _, ok := e["old_string"]; ok {
		return "Edit"
	}
	return "MultiEdit"
}

func abs(root, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(root, filepath.FromSlash(p))
}

// grepInput is Grep's {pattern, path, glob, output_mode, -i}: a literal
// query becomes a regular expression matching it.
func grepInput(root string, ours map[string]any) map[string]any {
	q, _ := ours["query"].(string)
	if re, _ := ours["regex"].(bool); !re {
		q = regexp.QuoteMeta(q)
	}
	e := map[string]any{"pattern": q, "path": root, "output_mode": "content"}
	if globs, ok := ours["globs"].([]any); ok && len(globs) > 0 {
		var gs []string
		for _, g := range globs {
			if s, ok := g.(string); ok {
				gs = append(gs, s)
			}
		}
		if len(gs) == 1 {
			e["glob"] = gs[0]
		} else if len(gs) > 1 {
			e["glob"] = "{" + strings.Join(gs, ",") + "}"
		}
	}
	if n, ok := ours["max_results"].(float64); ok {
		e["head_limit"] = int(n)
	}
	return e
}

// editInputs is the Claude Code shape of one file of a patch: Write's
// {file_path, content} for a new file, otherwise MultiEdit's {file_path,
// edits: [{old_string, new_string}]} with one edit per hunk, plus Edit's
// top-level old_string/new_string when there is one hunk. A rename shows
// both paths: the new one with the edits, the old one as emptied.
func editInputs(root string, f patch.File) []map[string]any {
	var edits []any
	var content strings.Builder
	for _, h := range f.Hunks {
		var oldS, newS []string
		for _, l := range h.Lines {
			switch l.Kind {
			case ' ':
				oldS, newS = append(oldS, l.Text), append(newS, l.Text)
			case '-':
				oldS = append(oldS, l.Text)
			case '+':
				newS = append(newS, l.Text)
				content.WriteString(l.Text + "\n")
			}
		}
		edits = append(edits, map[string]any{"old_string": strings.Join(oldS, "\n"), "new_string": strings.Join(newS, "\n")})
	}
	if edits == nil {
		edits = []any{}
	}
	e := map[string]any{"file_path": abs(root, f.Path()), "edits": edits}
	switch {
	case f.Op == patch.Create:
		e["content"] = content.String()
	case len(edits) == 1:
		one := edits[0].(map[string]any)
		e["old_string"], e["new_string"] = one["old_string"], one["new_string"]
	}
	out := []map[string]any{e}
	if f.Op == patch.Rename && f.OldPath != "" && f.OldPath != f.NewPath {
		out = append(out, map[string]any{"file_path": abs(root, f.OldPath), "edits": []any{}})
	}
	return out
}
