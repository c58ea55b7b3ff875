package workspace

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentos/agentos/kernel/sandbox"
)

// RepoIdentity names the repository of the worktree, the same for every
// worktree of it, so that its dependency caches outlive one session
// (docs/project-config.md): the object store a session worktree borrows
// through .git/objects/info/alternates (the server's mirror of the
// repository), else the common git directory of a checkout and its linked
// worktrees, else the worktree's top directory (the CLI's repository
// without git). Untrusted code (Options.UntrustedCode) gets its own, per
// worktree.
func (w *Root) RepoIdentity() string {
	if w.opts.UntrustedCode {
		return "untrusted:" + w.dir
	}
	git := filepath.Join(w.dir, ".git")
	if f, err := os.Open(filepath.Join(git, "objects", "info", "alternates")); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") && filepath.IsAbs(l) {
				return "alternates:" + filepath.Clean(l)
			}
		}
	}
	if b, err := os.ReadFile(git); err == nil {
		// A linked worktree: "gitdir: <main>/.git/worktrees/<name>".
		if d, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:"); ok {
			d = strings.TrimSpace(d)
			if !filepath.IsAbs(d) {
				d = filepath.Join(w.dir, d)
			}
			common := d
			if c, err := os.ReadFile(filepath.Join(d, "commondir")); err == nil {
				common = strings.TrimSpace(string(c))
				if !filepath.IsAbs(common) {
					common = filepath.Join(d, common)
				}
			}
			return "git:" + filepath.Clean(common)
		}
	}
	if fi, err := os.Stat(git); err == nil && fi.IsDir() {
		// The main checkout: the same name as its linked worktrees.
		return "git:" + git
	}
	return "dir:" + w.dir
}

// DepCaches are the repository's dependency caches (created if missing).
func (w *Root) DepCaches() (sandbox.DepCaches, error) {
	return w.opts.Sandbox.DepCacheDirs(w.RepoIdentity())
}

// UseDepCaches makes every later command (Run) see d read-only in place
// of the host's caches: the agent phase after the setup phase.
func (w *Root) UseDepCaches(d sandbox.DepCaches) {
	d.Writable = false
	w.deps.Store(&d)
}

// RunSetup runs one setup command as Run does, with the network allow-list
// allow (the policy's setup.network) and the dependency caches d
// writable.
func (w *Root) RunSetup(ctx context.Context, spec RunSpec, allow []string, d sandbox.DepCaches) (RunResult, error) {
	d.Writable = true
	return w.run(ctx, spec, allow, &d)
}

// SetupProfile describes what a setup command can see and do (recorded
// in its tool.invoke).
func (w *Root) SetupProfile(allow []string, d sandbox.DepCaches) sandbox.Profile {
	p := w.opts.Sandbox.Profile(w.dir, allow, w.opts.Limits, w.Excluded()...)
	if p.Mechanism != sandbox.None && p.Mechanism != sandbox.Unavailable {
		p.MaskedPatterns = append([]string(nil), w.opts.DenyPatterns...)
		p.Writable = append(p.Writable, d.GoMod+" (the repository's Go module cache)", d.NPM+" (the repository's npm cache)")
	}
	return p
}
