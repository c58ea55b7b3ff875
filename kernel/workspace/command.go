package workspace

import (
	"context"
	"errors"
	"strings"

	"github.com/agentos/agentos/kernel/sandbox"
)

// Command prepares a long-running process in the jail, confined by the
// workspace's sandbox exactly as Run confines a command (the worktree as
// working directory, the scrubbed environment, the network allow-list and
// limits, agentos's data directory masked), for callers that talk to it
// over its pipes (an MCP server on stdio). drop removes names from the
// scrubbed environment (nil keeps it); extraEnv then adds NAME=value
// entries the caller vetted (an MCP server's configured environment). The
// caller sets Stdin/Stdout/Stderr (or takes pipes), starts it, and must
// call Kill and Finish.
func (w *Root) Command(ctx context.Context, argv []string, drop func(name string) bool, extraEnv []string) (*sandbox.Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("empty command")
	}
	if err := w.SandboxErr(); err != nil {
		return nil, sandboxUnavailable(err)
	}
	all, _ := w.Env()
	env := all[:0:0]
	for _, kv := range all {
		name, _, _ := strings.Cut(kv, "=")
		if drop == nil || !drop(name) {
			env = append(env, kv)
		}
	}
	for _, kv := range extraEnv {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, errors.New("environment entry without a name: " + kv)
		}
		env = setEnv(env, name, kv)
	}
	return w.opts.Sandbox.Command(ctx, sandbox.Request{Argv: argv, Work: w.dir, Dir: w.dir, Env: env, Allow: w.opts.Network, Limits: w.opts.Limits, Mask: w.Masked(), Data: w.Excluded()})
}

func setEnv(env []string, name, kv string) []string {
	for i, e := range env {
		if strings.HasPrefix(e, name+"=") {
			env[i] = kv
			return env
		}
	}
	return append(env, kv)
}
