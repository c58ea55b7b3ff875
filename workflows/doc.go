// Package workflows holds the built-in Markdown the runtime reads as
// defaults: the role prompts (roles/<role>.md, the seed's canonical
// prompts) and, later, the workflow plane's cycles, phases, policies,
// personas and artifacts. A repository overrides a role prompt with
// .agent/roles/<role>.md.
package workflows

import "embed"

// FS holds the embedded Markdown.
//
//go:embed roles/*.md
var FS embed.FS
