package worktree

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// The git CLI, when this package runs it (the CLI backend's checkout at
// Prepare, mirror maintenance), runs on directories whose content a
// repository, a pull request or a command the agent ran may have shaped:
// the tree's .gitattributes and .gitmodules, gitlinks, and anything a
// test wrote into the worktree (a planted sub/.git gitfile pointing at a
// planted git directory whose config names an fsmonitor, hooks, filter
// drivers, an external diff, core.worktree, …). git runs here outside any
// sandbox, as agentos itself. So every invocation goes through execGit,
// which
//
//   - gives git a minimal environment, never agentos's own (which holds
//     the GitHub credentials, model keys, the webhook secret, the database
//     URL): PATH, an empty private HOME, LC_ALL=C, no system or global
//     configuration, no system attributes, no replace objects, no
//     terminal prompt, no lazy fetch, plus the caller's explicit entries
//     (the author identity);
//   - puts hardenedConfig first on the command line, which turns off every
//     configuration-driven program git could start and every recursion
//     into submodules (a planted repository is only ever reached through
//     a submodule or a gitfile).

// hardenedConfig is given as `-c key=value` before every git command.
// Command-line configuration overrides the repository's .git/config, so
// these hold whatever a repository's config says. Each entry names what
// it stops (git-config(1) and the commands' manuals).
var hardenedConfig = []string{
	// Programs git runs on its own while reading the worktree or index.
	"core.fsmonitor=false",      // fsmonitor hook: a program run on every status/add/commit/reset
	"core.hooksPath=/dev/null",  // hooks (pre-commit, post-checkout, reference-transaction, …): none found there
	"core.untrackedCache=false", // no writes of the untracked cache into the index
	"core.attributesFile=/dev/null",
	"core.excludesFile=/dev/null",
	"diff.external=",            // an external diff program
	"diff.ignoreSubmodules=all", // no look into a submodule's (planted) git directory
	"status.submoduleSummary=false",
	"core.pager=cat",              // pager (only with a terminal, but never a program of the repository's)
	"core.editor=false",           // editor: `false` exits at once
	"sequence.editor=false",       // rebase -i's editor
	"core.askPass=",               // credential prompt program
	"credential.helper=",          // an empty value clears the list of credential helpers
	"core.sshCommand=false",       // ssh transport program
	"core.gitProxy=",              // git:// proxy command
	"core.alternateRefsCommand=",  // run on an alternate's repository to list its refs
	"uploadpack.packObjectsHook=", // pack-objects wrapper of upload-pack
	"gpg.program=false",           // signing and verification programs
	"gpg.ssh.program=false",
	"gpg.x509.program=false",
	"gpg.ssh.defaultKeyCommand=",
	"commit.gpgSign=false",
	"tag.gpgSign=false",
	"protocol.allow=never",    // no transport at all: the CLI only works locally (see doc.go)
	"submodule.recurse=false", // no command recurses into submodules
	"fetch.recurseSubmodules=false",
	"push.recurseSubmodules=no",
	"gc.auto=0", // no automatic gc (which runs more git, and hooks)
	"gc.autoDetach=false",
	"maintenance.auto=false", // no automatic `git maintenance run`
}

// hardenedEnv is the whole environment of a git process: see the comment at the
// top of this file. home is an empty directory private to the call; extra
// are the caller's explicit entries.
func hardenedEnv(home string, extra []string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + home + "/.config", // does not exist
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_LAZY_FETCH=1",
		"GIT_PROTOCOL_FROM_USER=0",
		"GIT_OPTIONAL_LOCKS=0",
	}
	return append(env, extra...)
}

// gitArgs is the command line after the executable: -C dir, the hardened
// configuration, then args.
func gitArgs(dir string, args []string) []string {
	out := make([]string, 0, 2+2*len(hardenedConfig)+len(args))
	out = append(out, "-C", dir)
	for _, kv := range hardenedConfig {
		out = append(out, "-c", kv)
	}
	return append(out, args...)
}

// execGit runs the git executable at path in dir with the hardened
// configuration and the minimal environment (see above) plus env. It is
// the only way this package starts git.
func execGit(ctx context.Context, path, dir string, env []string, stdin *strings.Reader, stdout *bytes.Buffer, args ...string) error {
	home, err := os.MkdirTemp("", "agentos-git-home-")
	if err != nil {
		return fmt.Errorf("git %s: private HOME: %w", args[0], err)
	}
	defer os.RemoveAll(home)
	cmd := exec.CommandContext(ctx, path, gitArgs(dir, args)...)
	cmd.Env = hardenedEnv(home, env)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
