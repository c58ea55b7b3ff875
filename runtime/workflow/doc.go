// Package workflow is the workflow plane's registry (docs/customizing.md,
// "Workflow cycles"): cycles, phases, policies, personas and artifact templates
// written as Markdown with YAML frontmatter, loaded from the embedded
// workflows/ tree and a repository's .agent/workflows/ (which adds or
// overrides; each override is reported so the caller can record it as an
// event).
//
// Loading is allow-list only and fail-closed: a schema violation, an unknown
// or dangling id, a cycle without an exit, or a signal that does not
// type-check is a Problem naming the file and the field, and Load returns
// no registry. Lookups of an id that was not registered return
// ErrUnknownID. Signals and policy conditions are CEL expressions compiled
// at load time (expr.go); policy decisions merge conservatively (policy.go).
//
// Execution (hooks, events, fan-out) consumes this API; it lives elsewhere.
package workflow
