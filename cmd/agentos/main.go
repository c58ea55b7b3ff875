// Command agentos is the agentos CLI: it replays and verifies session logs,
// calls kernel tools, runs the agent runtime, serves the GitHub webhook bot
// and runs as a GitHub Action. main only wires; every subcommand is a plain
// function that tests call directly.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentos/agentos/runtime/buildinfo"
)

// Exit codes shared by every subcommand (exitCodesHelp describes them).
const (
	exitOK        = 0
	exitFailure   = 1 // the command could not do its job, or the answer is "no" (an invalid log)
	exitUsage     = 2
	exitBlocked   = 3 // denied: a run denied or cancelled, a tool call blocked, a hook's deny
	exitApproval  = 4 // paused: a run waits for an approval, a tool call needs one
	exitRunFailed = 5 // a run ended with a failed terminal report
)

// exitError carries a specific exit code up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// command is one subcommand.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the subcommand table. Keep one line per subcommand.
func commands() map[string]command {
	return map[string]command{
		"version":   {"print the version", cmdVersion},
		"run":       {"run the agent on a repository: agentos run --repo DIR \"prompt\"", cmdRun},
		"approve":   {"approve a pending action and resume the run", cmdResolve("approve")},
		"deny":      {"deny a pending action (the reason goes back to the agent) and resume", cmdResolve("deny")},
		"resume":    {"resume a paused session, or take over one whose process was killed", cmdResume},
		"cancel":    {"cancel a paused session's run (status cancelled, run.cancelled)", cmdCancel},
		"tool":      {"list tools, or call one through the full kernel: agentos tool call NAME --args JSON --workspace DIR", cmdTool},
		"skills":    {"list the skills: agentos skills list [--repo DIR] [--json]", cmdSkills},
		"workflows": {"list, validate, explain or run the workflow plane: agentos workflows list|validate|explain|run [CYCLE] [--repo DIR]", cmdWorkflows},
		"hooks":     {"fire an event's hooks with stdin as input: agentos hooks test EVENT < input.json", cmdHooks},
		"demo":      {"run the bundled demo: fix a real bug in a sample repository", cmdDemo},
		"replay":    {"fold a session log into its snapshot", cmdReplay},
		"verify":    {"check a session log's hash chain, schemas and audit completeness", cmdVerify},
		"action":    {"run as the GitHub Action: handle the workflow's triggering event (see action.yml)", cmdAction},
		"serve":     {"serve the webhook bot and the HTTP API: agentos serve [--addr HOST:PORT] [--data DIR] [--config FILE]", cmdServe},
		"bench":     {"benchmarks users can rerun: agentos bench guard (an injected-error matrix over public tool corpora)", cmdBench},
		"view":      {"serve a session log as the run viewer's page, read-only, on localhost: agentos view <events.jsonl>", cmdView},
		"doctor":    {"check the sandbox commands run in and what they can see: agentos doctor [--config FILE] [--json]", cmdDoctor},
		"mcp":       {"serve the kernel's governed tools to MCP clients: agentos mcp serve --workspace DIR [--http ADDR]", cmdMCP},
		"login":     {"sign in to an agentos server with GitHub (device flow): agentos login --server URL", cmdLogin},
		"runs":      {"list a server's sessions you may read: agentos runs [--server URL] [--repo R] [--state S]", cmdRuns},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "agentos:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "agentos:", err)
	return exitFailure
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmds := commands()
	if len(args) == 0 || (len(args) == 1 && (args[0] == "help" || isHelpArg(args[0]))) {
		printUsage(stdout, cmds)
		if len(args) == 0 {
			return &exitError{code: exitUsage, err: errors.New("")}
		}
		return nil
	}
	name, rest := args[0], args[1:]
	if name == "help" { // agentos help COMMAND
		name, rest = args[1], []string{"-h"}
	}
	c, ok := cmds[name]
	if !ok {
		printUsage(stderr, cmds)
		return usageErrorf("unknown command %q", name)
	}
	h, documented := helps()[name]
	// agentos CMD -h, before the command looks at its arguments (tool,
	// skills and hooks take a subcommand first); a -h after other
	// arguments reaches the command's flag parsing, which returns errHelp.
	if documented && len(rest) > 0 && isHelpArg(rest[0]) {
		printHelp(stdout, name, h)
		return nil
	}
	err := c.run(ctx, rest, stdout, stderr)
	if errors.Is(err, errHelp) && documented {
		printHelp(stdout, name, h)
		return nil
	}
	return err
}

func cmdVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fmt.Fprintln(stdout, "agentos", buildinfo.Version())
	return nil
}
