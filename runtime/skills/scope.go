package skills

import "strings"

// BuiltinRoot is the Root name of the skills agentos ships.
const BuiltinRoot = "builtin"

// TakesMounted reports whether the skill's scope takes in the mounted MCP
// servers' tools (.mcp.json, the profile's) without naming them: a skill
// without allowed-tools (it gets the default tools) and the skills
// agentos ships, which cannot name a repository's servers. A repository's
// skill with allowed-tools gets exactly what it names, MCP tools included
// (mcp__server__tool, mcp__server); docs/claude-code.md.
func (s *Skill) TakesMounted() bool { return s.DeclaredTools == nil || s.Root == BuiltinRoot }

// Unnamed returns the mounted servers' scope entries ("mcp.<server>.*")
// that allowed names no tool of: what a skill's scope leaves out.
func Unnamed(allowed, mounted []string) []string {
	var out []string
	for _, m := range mounted {
		prefix := strings.TrimSuffix(m, "*")
		named := false
		for _, a := range allowed {
			if strings.HasPrefix(a, prefix) {
				named = true
				break
			}
		}
		if !named {
			out = append(out, m)
		}
	}
	return out
}
