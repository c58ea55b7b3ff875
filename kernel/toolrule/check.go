package toolrule

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// Refusal says why a call's arguments are not allowed: the deny rule that
// matched, or the allow rules none of which did, or what could not be
// checked. It is what the kernel records as a TOOL_NOT_ALLOWED
// rejection's details.
type Refusal struct {
	Tool    string `json:"tool"`
	Subject string `json:"subject"`        // the command or path refused
	Rule    string `json:"rule,omitempty"` // the deny rule that matched
	// Allowed are the allow rules none of which matches Subject.
	Allowed []string `json:"allowed,omitempty"`
	Reason  string   `json:"reason"`
	// Source is the refusing set's Source: "" for the Action's lists,
	// SourceSkills for the loaded skills' allowed-tools.
	Source string `json:"source,omitempty"`
}

func (r *Refusal) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q: %s", r.Tool, r.Subject, r.Reason)
	allowed, disallowed := "allowed_tools", "disallowed_tools"
	if r.Source != "" {
		allowed, disallowed = r.Source, r.Source
	}
	if r.Rule != "" {
		fmt.Fprintf(&b, " (%s rule %s)", disallowed, r.Rule)
	}
	if len(r.Allowed) > 0 {
		fmt.Fprintf(&b, " (%s rules %s)", allowed, strings.Join(r.Allowed, ", "))
	}
	return b.String()
}

// CheckArgs checks a call's arguments (the guard's canonical JSON)
// against the rules: process.run's command (and its cwd, for
// redirections), repo.read's path, and repo.search, which reads every
// file and so is refused while a Read rule is in force. Write tools are
// checked with CheckWrite once their paths are known. A nil or empty
// set allows everything.
func (s *Set) CheckArgs(tool string, args json.RawMessage) *Refusal {
	return s.sourced(s.checkArgs(tool, args))
}

// sourced marks a refusal with the set's Source.
func (s *Set) sourced(r *Refusal) *Refusal {
	if r != nil && r.Source == "" {
		r.Source = s.Source
	}
	return r
}

// family is the rule family that binds a kernel tool's arguments.
func (s *Set) family(tool string) family { return toolFamily[tool] }

func (s *Set) checkArgs(tool string, args json.RawMessage) *Refusal {
	f := s.family(tool)
	if s.Empty() || f == 0 || f == famEdit || !s.inForce(f) {
		return nil
	}
	switch {
	case f == famBash:
		var a struct {
			Command string `json:"command"`
			Cwd     string `json:"cwd"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return &Refusal{Tool: tool, Subject: string(args), Reason: "the arguments cannot be read to check them against the rules: " + err.Error()}
		}
		return s.CheckCommand(tool, a.Command, a.Cwd)
	case tool == "repo.read":
		var a struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return &Refusal{Tool: tool, Subject: string(args), Reason: "the arguments cannot be read to check them against the rules: " + err.Error()}
		}
		return s.checkPath(tool, famRead, a.Path)
	case tool == "repo.search":
		rules, _ := s.allowRules(famRead)
		if s.searchMasked && len(rules) == 0 {
			return nil
		}
		return &Refusal{Tool: tool, Subject: string(args), Allowed: raws(rules), Reason: "repo.search reads every file of the repository, which the Read rules in force cannot be checked against; read allowed files with repo.read"}
	}
	return nil
}

// CheckWrite checks the paths a write tool changes (repo.patch,
// repo.write) against the Edit rules. A write whose paths are not known
// is refused while an Edit rule is in force.
func (s *Set) CheckWrite(tool string, paths []string) *Refusal {
	return s.sourced(s.checkWrite(tool, paths))
}

func (s *Set) checkWrite(tool string, paths []string) *Refusal {
	if s.Empty() || s.family(tool) != famEdit || !s.inForce(famEdit) {
		return nil
	}
	if len(paths) == 0 {
		return &Refusal{Tool: tool, Reason: "the paths of this write are not known, so the Edit rules cannot be checked"}
	}
	for _, p := range paths {
		if r := s.checkPath(tool, famEdit, p); r != nil {
			return r
		}
	}
	return nil
}

// cleanPath makes p a clean repository-relative path, or fails for one
// outside the repository.
func cleanPath(p string) (string, bool) {
	if p == "" || strings.ContainsRune(p, 0) {
		return "", false
	}
	c := path.Clean(strings.ReplaceAll(p, "\\", "/"))
	c = strings.TrimPrefix(c, "./")
	if c == "." || c == ".." || strings.HasPrefix(c, "../") || path.IsAbs(c) {
		return "", false
	}
	return c, true
}

// checkPath checks one path against the family's rules: a deny rule
// refuses it; while allow rules with a path are in force (and the bare
// name is not allowed), one of them must match.
func (s *Set) checkPath(tool string, f family, p string) *Refusal {
	c, ok := cleanPath(p)
	if !ok {
		return &Refusal{Tool: tool, Subject: p, Reason: "the path is not inside the repository, so no rule can allow it"}
	}
	for _, r := range s.denyRules(f) {
		for _, pp := range r.pats {
			if pp.match(c) {
				return &Refusal{Tool: tool, Subject: c, Rule: r.Raw, Reason: "a disallowed rule matches the path"}
			}
		}
	}
	rules, all := s.allowRules(f)
	if all || len(rules) == 0 {
		return nil
	}
	for _, r := range rules {
		for _, pp := range r.pats {
			if pp.match(c) {
				return nil
			}
		}
	}
	return &Refusal{Tool: tool, Subject: c, Allowed: raws(rules), Reason: fmt.Sprintf("no allowed %s rule matches the path", f)}
}

// redirect decides a redirection's target: writing needs an
// Edit rule that allows the path (or Edit allowed bare), reading is
// checked like repo.read. /dev/null is always fine.
func (s *Set) redirect(tool, cwd, target string, write bool) *Refusal {
	if target == "/dev/null" {
		return nil
	}
	p := target
	if cwd != "" && !path.IsAbs(target) {
		p = path.Join(cwd, target)
	}
	if !write {
		return s.checkPath(tool, famRead, p)
	}
	if r := s.checkPath(tool, famEdit, p); r != nil {
		r.Reason = "a redirection writes the path: " + r.Reason
		return r
	}
	if rules, all := s.allowRules(famEdit); !s.perm && !all && len(rules) == 0 {
		return &Refusal{Tool: tool, Subject: target, Reason: "a redirection writes the path, and no allowed Edit rule allows writing it"}
	}
	return nil
}
