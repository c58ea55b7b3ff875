package tools

import "github.com/agentos/agentos/kernel/workspace"

// Project is what a workspace's own files decide about its commands: the
// test and lint commands test.run and lint.run would run, and the setup
// phase (docs/project-config.md). agentos doctor checks them before a run
// meets them.
type Project struct {
	Test, Lint       string
	TestErr, LintErr error // no command could be decided, or .agent/config.yaml is invalid
	Setup            Setup
	SetupErr         error
}

// ProjectCommands returns the workspace's commands, each decided as the
// tools decide them.
func ProjectCommands(ws *workspace.Root) Project {
	t := &tools{ws: ws}
	var p Project
	p.Test, p.TestErr = t.testCommand("")
	p.Lint, p.LintErr = t.lintCommand()
	p.Setup, p.SetupErr = SetupCommands(ws)
	return p
}
