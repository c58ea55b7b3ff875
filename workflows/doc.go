// Package workflows holds the built-in Markdown the runtime reads as
// defaults: the role prompts (roles/<role>.md, the canonical
// prompts) and the workflow plane's cycles/, phases/, policies/,
// personas/<role>/ and artifacts/ (loaded by runtime/workflow). A
// repository overrides a role prompt with .agent/roles/<role>.md and adds
// or overrides workflow definitions under .agent/workflows/.
package workflows

import "embed"

// FS holds the embedded Markdown.
//
//go:embed roles/*.md cycles/*.md phases/*.md policies/*.md personas/*/*.md artifacts/*.md
var FS embed.FS

// PlaneIgnore lists the entries of FS that are not workflow-plane
// definitions (runtime/workflow.Source.Ignore for the embedded tree).
var PlaneIgnore = []string{"roles", "doc.go"}
