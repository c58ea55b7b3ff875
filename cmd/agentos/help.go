package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/agentos/agentos/bot/config"
)

// errHelp is returned by parseFlags for -h, -help and --help; run prints
// the command's help to stdout and exits 0.
var errHelp = errors.New("help requested")

// exitCodesHelp is the exit-code table, printed by `agentos -h`,
// `agentos run -h` (and approve, deny, resume) and kept in the README.
const exitCodesHelp = `exit codes:
  0  success; a run completed
  1  error: the command could not do its job (verify: the log is invalid)
  2  usage error (unknown command or flag, missing argument); the provider check failed
  3  denied: a run was denied or cancelled; a tool call was blocked; a hook denied
  4  paused: a run waits for an approval; a tool call needs one
  5  failed: a run ended with a failed terminal report (provider error, timeout, ...)
  6  signed out: login, runs and view --server have no token the server and GitHub accept`

// help is one command's documentation. Flags registers exactly the flags
// the command parses (the command calls the same function), so the help
// cannot list a flag that does not exist or miss one that does.
type help struct {
	usage       []string // synopsis lines, without "agentos "
	description string   // one paragraph
	flags       func(fs *flag.FlagSet)
	subcommands []subHelp
	examples    []string
	exitCodes   bool
}

// subHelp documents a subcommand (agentos tool call).
type subHelp struct {
	name, usage, description string
	flags                    func(fs *flag.FlagSet)
}

// helps documents every command of commands(). A test fails when a
// command has no entry here.
func helps() map[string]help {
	runFlagsOnly := func(fs *flag.FlagSet) { runCmdFlags(fs) }
	return map[string]help{
		"version": {
			usage:       []string{"version"},
			description: "Print the version of this agentos binary: the release's (stamped at build time), else the module version go install recorded, else devel+<revision> from a checkout, or \"devel\" when the toolchain recorded none (go run, -buildvcs=false).",
			examples:    []string{"agentos version"},
		},
		"run": {
			usage: []string{`run --repo DIR [flags] PROMPT...`},
			description: "Run the agent on a working tree: the Lead, Planner, Worker and Reviewer work on PROMPT, " +
				"changing DIR only through the kernel's tools. Progress is printed as the run appends events; at the end " +
				"the terminal report and the path of the session's events.jsonl. The provider, model and limits come " +
				"from --profile, then the environment (AGENTOS_PROVIDER, AGENTOS_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY, " +
				"ANTHROPIC_API_KEY, GEMINI_API_KEY, ...), then --provider and --script. A risky action pauses the run " +
				"(exit 4): answer with agentos approve or agentos deny, in this or any later process.",
			flags: runFlagsOnly,
			examples: []string{
				`agentos run --repo . --provider scripted --script runtime/demo/testdata/fix-auth.script.yaml "fix the failing token check in auth.go"`,
				`OPENAI_BASE_URL=http://localhost:11434/v1 AGENTOS_PROVIDER=openai AGENTOS_MODEL=qwen2.5-coder:7b agentos run --repo . "fix the failing test"`,
				`ANTHROPIC_API_KEY=sk-ant-... agentos run --repo . --profile profile.yaml --json "add a test for CheckToken"`,
			},
			exitCodes: true,
		},
		"approve": {
			usage:       []string{"approve SESSION APPROVAL-ID --repo DIR [flags]"},
			description: "Approve a pending action of a paused session and resume the run from its log (the same --repo, --data and provider settings as the run). The action executes only if its digest and the working tree still match what was previewed.",
			flags:       func(fs *flag.FlagSet) { resolveFlags(fs) },
			examples:    []string{"agentos approve cli-01k9xyz ap-424fe763039e --repo . --provider scripted --script run.script.yaml"},
			exitCodes:   true,
		},
		"deny": {
			usage:       []string{"deny SESSION APPROVAL-ID --repo DIR [--reason TEXT] [flags]"},
			description: "Deny a pending action of a paused session and resume the run: nothing is executed, and --reason goes back to the agent as the tool's result, so it can try another way.",
			flags:       func(fs *flag.FlagSet) { resolveFlags(fs) },
			examples:    []string{`agentos deny cli-01k9xyz ap-424fe763039e --repo . --reason "do not touch auth.go" --provider scripted --script run.script.yaml`},
			exitCodes:   true,
		},
		"cancel": {
			usage:       []string{"cancel SESSION [--reason TEXT] [--by NAME] [--data DIR] [--json]"},
			description: "End a paused session's run as cancelled, the same path as POST /v1/runs/:id/cancel, /agent cancel and closing the PR: each pending approval is resolved cancelled, then run.cancelled, a terminal report with status cancelled, session.close, and the exported events.jsonl is rewritten. Exit 0 cancelled, 1 when the session has no paused run.",
			flags:       func(fs *flag.FlagSet) { cancelFlags(fs) },
			examples:    []string{`agentos cancel cli-01k9xyz --reason "not needed any more"`, "agentos cancel cli-01k9xyz --data /var/lib/agentos --json"},
		},
		"resume": {
			usage:       []string{"resume SESSION --repo DIR [flags]"},
			description: "Resume a paused session whose approvals were already answered (for example through the HTTP API), or take over a session whose process was killed mid-run (the session lock shows no process holds it). The run re-executes from its log: no model call or tool call is repeated; a tool call the log shows started but not finished is undone and answered INTERRUPTED, never run again.",
			flags:       func(fs *flag.FlagSet) { resumeFlags(fs) },
			examples:    []string{"agentos resume cli-01k9xyz --repo . --profile profile.yaml"},
			exitCodes:   true,
		},
		"tool": {
			usage:       []string{"tool list [--json]", "tool call NAME --args JSON --workspace DIR [flags]", "tool approve APPROVAL-ID --workspace DIR --events FILE [flags]"},
			description: "List the capability tools, or call one through the full kernel (argument guard, policy, hooks, approval, jail) without a model. A call that needs approval is recorded in --events and exits 4; tool approve executes it after checking it again. Exit 3 means the kernel blocked the call.",
			subcommands: []subHelp{
				{"list", "tool list [--json]", "print every tool with its category and description (--json: with input and output schemas)", func(fs *flag.FlagSet) { toolListFlags(fs) }},
				{"call", "tool call NAME --args JSON --workspace DIR [flags]", "call one tool", func(fs *flag.FlagSet) { toolCallFlags(fs) }},
				{"approve", "tool approve APPROVAL-ID --workspace DIR --events FILE [flags]", "execute a pending call recorded in --events", func(fs *flag.FlagSet) { toolApproveFlags(fs) }},
			},
			examples: []string{
				"agentos tool list",
				`agentos tool call repo.search --args '{"query":"CheckToken"}' --workspace .`,
				`agentos tool call repo.write --args '{"path":"NOTES.md","content":"hi\n","expected_hash":""}' --workspace . --events calls.jsonl`,
			},
		},
		"mcp": {
			usage: []string{"mcp serve --workspace DIR [--policy FILE] [--events FILE] [--http ADDR [--token-file FILE]]"},
			description: "Serve the kernel's governed tools (repo.read, repo.search, repo.patch, test.run, ...) as an MCP server, on stdio or, with --http, " +
				"over Streamable HTTP at http://ADDR/mcp behind a bearer token. Every call goes through the full kernel (guard, hooks, policy, approval, jail) " +
				"and is recorded in --events. A call that needs approval is not executed: the client gets an \"approval required\" tool result with the " +
				"pending id, which a maintainer answers with agentos tool approve ID --events FILE.",
			subcommands: []subHelp{
				{"serve", "mcp serve --workspace DIR [flags]", "serve the tools on stdio, or on --http ADDR", func(fs *flag.FlagSet) { mcpServeFlags(fs) }},
			},
			examples: []string{
				"agentos mcp serve --workspace .",
				`claude mcp add agentos -- agentos mcp serve --workspace "$PWD"`,
				"AGENTOS_MCP_TOKEN=$(openssl rand -hex 24) agentos mcp serve --workspace . --http 127.0.0.1:8765",
				"agentos tool approve ap-424fe763039e --workspace . --events .agentos/mcp/events.jsonl",
			},
		},
		"skills": {
			usage:       []string{"skills list [--repo DIR] [--json]"},
			description: "List the skills the runtime would offer: the built-in ones and, with --repo, the repository's .agent/skills and .claude/skills (SKILL.md). Skills that fail validation are listed as skipped, with the reason.",
			flags:       func(fs *flag.FlagSet) { skillsFlags(fs) },
			examples:    []string{"agentos skills list --repo .", "agentos skills list --json"},
		},
		"workflows": {
			usage:       []string{"workflows list [--repo DIR] [--json]", "workflows validate [--repo DIR] [--json]", "workflows explain CYCLE [--repo DIR] [--json]", "workflows run CYCLE --repo DIR [--mode MODE] [--input NAME=FILE]... [--json] PROMPT"},
			description: "Show the workflow plane: the built-in cycles, phases, policies, personas and artifact templates (workflows/) and, with --repo, the repository's .agent/workflows, which adds or overrides (each override is printed). Loading is fail-closed: a schema violation, an unknown or dangling id, a cycle without an exit or a signal expression that does not type-check is printed as FILE:LINE: FIELD: MESSAGE and the command exits 1. explain prints a cycle (by id or trigger word) as its phase graph.",
			subcommands: []subHelp{
				{"list", "workflows list [--repo DIR] [--json]", "print every loaded definition with where it came from", func(fs *flag.FlagSet) { workflowsFlags(fs) }},
				{"validate", "workflows validate [--repo DIR] [--json]", "load everything and print the problems (exit 1) or ok", func(fs *flag.FlagSet) { workflowsFlags(fs) }},
				{"explain", "workflows explain CYCLE [--repo DIR] [--json]", "print a cycle as its phase graph: fan-out, policies, signals, exit and loop bounds", func(fs *flag.FlagSet) { workflowsFlags(fs) }},
				{"run", "workflows run CYCLE --repo DIR [--mode MODE] [--input NAME=FILE]... [--json] PROMPT", "run a cycle as a run of the session: it pauses for approvals like agentos run (approve, deny, resume continue it); prints the verdict and a review's decisions", func(fs *flag.FlagSet) { workflowRunCmdFlags(fs) }},
			},
			examples: []string{"agentos workflows list", "agentos workflows validate --repo .", "agentos workflows explain review --repo .", "agentos workflows run review --repo . --input diff=pr.diff --mode report-only \"review this change\""},
		},
		"hooks": {
			usage:       []string{"hooks test EVENT [--repo DIR] < input.json"},
			description: "Fire one event's hooks (PreToolUse, PostToolUse, UserPromptSubmit, ...) from the repository's .agent/settings.json and .claude/settings.json, with Claude Code's hook input JSON on stdin, and print the decision. Nothing is recorded. Exit 3 when a hook denies.",
			flags:       func(fs *flag.FlagSet) { hooksFlags(fs) },
			examples:    []string{`echo '{"tool_name":"repo.patch","tool_input":{"path":"auth.go"}}' | agentos hooks test PreToolUse --repo .`},
		},
		"demo": {
			usage:       []string{"demo [--out DIR] [--ask | --github]"},
			description: "Run the bundled demo with the scripted model: the agent fixes a real bug in a sample Go module, pauses for approval of its patch, resumes, and the tests pass; the event trace, the replay snapshot and the verified events.jsonl are printed. --github plays the same fix through the bot on a fake GitHub and a local git host instead. Needs no key and no network.",
			flags:       func(fs *flag.FlagSet) { demoFlags(fs) },
			examples:    []string{"agentos demo", "agentos demo --ask --out /tmp/agentos-demo", "agentos demo --github"},
		},
		"replay": {
			usage:       []string{"replay <events.jsonl | SESSION> [--json] [--data DIR]"},
			description: "Fold a session log into its snapshot without calling any model or tool: the event trace, then status, terminal report, usage, tools and approvals. A session id is read from the embedded store in --data, or from PostgreSQL when AGENTOS_DATABASE_URL is set (replicas).",
			flags:       func(fs *flag.FlagSet) { replayFlags(fs) },
			examples:    []string{"agentos replay testdata/example-session/events.jsonl", "agentos replay cli-01k9xyz --json"},
		},
		"verify": {
			usage:       []string{"verify <events.jsonl> [--json] [--lenient]"},
			description: "Check a session log: the hash chain, contiguous sequence numbers, every payload against its schema, exactly one terminal report per run, and audit completeness (a session that closed ok must hold every event type of the audit list; --lenient reports a missing type as advice, for logs written before the rule). Exit 0 valid, 1 invalid, 2 usage.",
			flags:       func(fs *flag.FlagSet) { verifyFlags(fs) },
			examples:    []string{"agentos verify testdata/example-session/events.jsonl", "agentos verify events.jsonl --json", "agentos verify old-events.jsonl --lenient"},
		},
		"action": {
			usage:       []string{"action"},
			description: "The GitHub Action's entrypoint (the image's ENTRYPOINT): handle the event that started the workflow run, configured by the Actions environment (GITHUB_EVENT_PATH, GITHUB_TOKEN, RUNNER_TEMP, ...) and the action's inputs (INPUT_*; see action.yml). A pause for approval, a denial or a cancellation exits 0 (the maintainer's review starts the next run); a failed run exits 5, so the workflow run shows it.",
			examples:    []string{"uses: owner/agentos@v1   # in a workflow step; see docs/examples/agentos-workflow.yml"},
		},
		"login": {
			usage:       []string{"login [--server URL]"},
			description: "Sign in to an agentos server as your GitHub user, with GitHub's device flow for the server's GitHub App: the server names the app's client ID (GET /v1/auth/device), you enter the printed code at GitHub's verification page, and the user access token is stored for that server in the user configuration directory (agentos/credentials.json, mode 0600; never printed or logged). agentos runs and agentos view --server send it; the server shows the sessions of the repositories you may read. The app must have \"Enable Device Flow\" on. GitHub's tokens last eight hours; then sign in again. http:// servers are refused except on localhost. Exit 6 when the sign-in is cancelled, expires or refused.",
			flags:       func(fs *flag.FlagSet) { loginFlags(fs) },
			examples:    []string{"agentos login --server https://agentos.example.com", "AGENTOS_SERVER=https://agentos.example.com agentos login"},
		},
		"runs": {
			usage:       []string{"runs [--server URL] [--repo OWNER/NAME] [--state STATE] [--since TIME] [--limit N] [--json]"},
			description: "List the sessions of an agentos server that you may read (GET /v1/runs with the token of agentos login), newest activity first: state, repository, events, pending approvals, cost and prompt. --server defaults to $AGENTOS_SERVER, or the only server you signed in to. Exit 6 when not signed in or the token expired or was revoked.",
			flags:       func(fs *flag.FlagSet) { runsFlags(fs) },
			examples:    []string{"agentos runs --repo octo/app --state paused", "agentos runs --server https://agentos.example.com --json"},
		},
		"view": {
			usage:       []string{"view <events.jsonl> [--addr 127.0.0.1:0]", "view --server URL SESSION [--json]"},
			description: "Serve a finished session's log (an events.jsonl, e.g. from the agent-sessions branch or `agentos demo`) as the run viewer's page: the timeline of model and tool calls, approvals and their diffs, tokens and cost, the terminal report and every event. Read-only, no GitHub and no sign-in, so it listens on the loopback interface only. The log must verify (agentos verify). Runs until Ctrl-C. With --server URL (after agentos login), print the session as that server shows it instead: state, prompt, cost against the budget, pending approvals, terminal report and the page's link (exit 6 when the token expired or was revoked; not found when you may not read it).",
			flags:       func(fs *flag.FlagSet) { viewFlags(fs) },
			examples:    []string{"agentos view testdata/sessions/approval.events.jsonl", "agentos view /tmp/agentos-demo/events.jsonl --addr 127.0.0.1:8081", "agentos view --server https://agentos.example.com gh-01k9xyz"},
		},
		"doctor": {
			usage:       []string{"doctor [--workspace DIR] [--config FILE] [--data DIR] [--json]"},
			description: "Show the OS sandbox commands run in (bwrap, Landlock, none or unavailable, and why), its limits and network, then probe from inside whether the server's data directory, its GitHub App key, its config file and the user's credentials (~/.ssh, ~/.aws, ~/.config/gh, ...) stay hidden. In a repository (--workspace, else the one holding the working directory) it checks what a run there would meet: toolchains in the sandbox, masked files, the setup phase, and the rules of its Claude Code permissions (.claude/settings.json, settings.local.json) that agentos enforces or does not do as written. Reads the same configuration as serve (--config, the environment, the flags). Exit 0 when commands would run confined, 1 when they would be refused or a secret path is visible, 2 usage.",
			flags:       func(fs *flag.FlagSet) { doctorFlags(fs) },
			examples:    []string{"agentos doctor", "AGENTOS_SANDBOX=landlock agentos doctor --json", "agentos doctor --workspace . --config /etc/agentos.yaml"},
		},
		"bench": {
			usage:       []string{"bench guard [--corpus builtin,github,mcp] [--npm-dir DIR] [--json]"},
			description: "Run the tool-guard benchmark: every tool of each corpus (agentos's built-in tools; GitHub's REST description from @octokit/openapi, one tool per operation, GitHub's request examples as the calls; the MCP reference servers' tools from their tools/list) gets its ground-truth calls, which must all pass the guard, and the injected-error matrix (unknown tool, near-miss name, missing required, wrong type, bad enum, extra argument, absolute path, semantic error, unparsable arguments), which must all be blocked before execution with the right error class. Prints per corpus, per injected error: injected, blocked, right class, repaired, executed, and the false-reject rate. By default it runs the built-in corpus, and the public corpora when they are installed (npm install --prefix ~/.cache/agentos-npm @octokit/openapi @modelcontextprotocol/server-everything @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-memory); a corpus named with --corpus must be installed.",
			flags:       func(fs *flag.FlagSet) { benchFlags(fs) },
			examples:    []string{"agentos bench guard", "agentos bench guard --corpus builtin", "agentos bench guard --corpus github --json"},
		},
		"serve": {
			usage:       []string{"serve [--addr HOST:PORT] [--data DIR] [--config FILE] [--store postgres://USER@HOST/DB]"},
			description: "Serve the GitHub webhook bot and the HTTP/SSE API until SIGINT or SIGTERM. Secrets come only from the environment (AGENTOS_WEBHOOK_SECRET, AGENTOS_GITHUB_APP_ID and AGENTOS_GITHUB_PRIVATE_KEY_FILE or AGENTOS_GITHUB_TOKEN, the provider's key); the rest from --config, the environment and the flags, in that order. By default the event store and the delivery queue are embedded (SQLite and a log in --data, one process). With --store postgres://… (or AGENTOS_DATABASE_URL, or AGENTOS_DATABASE_URL_FILE) both live in PostgreSQL and any number of replicas behind a load balancer share them: migrations run at start under an advisory lock, a replica refuses a newer schema, deliveries are deduplicated and claimed once across replicas, and event streams follow appends made on any replica. AGENTOS_REPLICA_ID names a replica (a restarted replica of the same name releases its claims at once). GET /v1/deliveries?state=dead (with the API token) lists the deliveries that failed for good.",
			flags:       func(fs *flag.FlagSet) { config.BindFlags(fs) },
			examples: []string{
				"AGENTOS_WEBHOOK_SECRET=... AGENTOS_GITHUB_TOKEN=... AGENTOS_PROVIDER=anthropic ANTHROPIC_API_KEY=... agentos serve --addr 0.0.0.0:8080",
				"AGENTOS_DATABASE_URL=postgres://agentos@db:5432/agentos AGENTOS_REPLICA_ID=replica-1 agentos serve --addr 0.0.0.0:8080",
				"curl -H \"Authorization: Bearer $AGENTOS_API_TOKEN\" 'http://localhost:8080/v1/deliveries?state=dead'",
			},
		},
	}
}

// isHelpArg reports whether a is one of the help flags.
func isHelpArg(a string) bool {
	switch a {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// printHelp prints a command's help.
func printHelp(w io.Writer, name string, h help) {
	for i, u := range h.usage {
		prefix := "usage: "
		if i > 0 {
			prefix = "       "
		}
		fmt.Fprintf(w, "%sagentos %s\n", prefix, u)
	}
	fmt.Fprintf(w, "\n%s\n", wrap(h.description, 78))
	if h.flags != nil {
		fmt.Fprintln(w, "\nflags:")
		printFlags(w, name, h.flags)
	}
	for _, s := range h.subcommands {
		fmt.Fprintf(w, "\nagentos %s\n  %s\n", s.usage, s.description)
		if s.flags != nil {
			printFlags(w, name+" "+s.name, s.flags)
		}
	}
	fmt.Fprintln(w, "\nexamples:")
	for _, e := range h.examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
	if h.exitCodes {
		fmt.Fprintf(w, "\n%s\n", exitCodesHelp)
	}
}

func printFlags(w io.Writer, name string, register func(fs *flag.FlagSet)) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	register(fs)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// wrap breaks s into lines of at most width characters, at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, word := range strings.Fields(s) {
		if n > 0 && n+1+len(word) > width {
			b.WriteByte('\n')
			n = 0
		} else if n > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

// printUsage prints the command list and the exit codes (agentos -h).
func printUsage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: agentos <command> [arguments]")
	fmt.Fprintln(w)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nagentos <command> -h describes a command, its flags and examples.")
	fmt.Fprintf(w, "\n%s\n", exitCodesHelp)
}
