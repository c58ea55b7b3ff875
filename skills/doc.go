// Package skills holds the built-in Markdown skills (skills/<name>/SKILL.md),
// embedded as the default skill root of the runtime's skill registry.
// Repositories add or override skills under .agent/skills/ and
// .claude/skills/.
package skills

import "embed"

// FS holds every built-in skill directory.
//
//go:embed */SKILL.md
var FS embed.FS
