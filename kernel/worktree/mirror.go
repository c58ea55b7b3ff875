package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// headsSpec mirrors every branch of the remote.
const headsSpec = config.RefSpec("+refs/heads/*:refs/heads/*")

// openMirror opens the bare mirror of r, creating it on first use. The
// caller holds the mirror lock.
//
// A new mirror is created aside — initialised, configured and fetched
// (the clone) in a directory next to it — and renamed into place only
// when complete, so a process killed while creating it leaves no half
// mirror that later operations would take for a real one: one without
// its origin remote (nothing could ever be fetched into it) or with a
// torn first fetch. Each open also removes what a fetch killed half-way
// leaves in an existing mirror (see cleanPacks).
func (m *Manager) openMirror(ctx context.Context, r Repo, c cred) (*git.Repository, error) {
	dir := m.mirrorDir(r)
	repo, err := git.PlainOpen(dir)
	if err == nil {
		if cfg, cerr := repo.Config(); cerr == nil && cfg.Remotes["origin"] != nil {
			if err := cleanPacks(dir); err != nil {
				return nil, fmt.Errorf("worktree: mirror %s: %w", r, err)
			}
			return repo, nil
		}
		// A repository without its origin remote is what a process
		// killed while creating the mirror in place (before mirrors were
		// created aside) left: created again below.
	} else if !errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("worktree: open mirror %s: %w", r, err)
	}
	// Not a mirror: nothing, or what a process killed while creating it
	// in place left there.
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("worktree: remove the unfinished mirror %s: %w", r, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("worktree: create mirror %s: %w", r, err)
	}
	// Directories of earlier attempts that died (the lock is held: no
	// other process is creating this mirror).
	if old, err := filepath.Glob(dir + mirrorTmpSuffix + "*"); err == nil {
		for _, o := range old {
			_ = os.RemoveAll(o)
		}
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+mirrorTmpSuffix)
	if err != nil {
		return nil, fmt.Errorf("worktree: create mirror %s: %w", r, err)
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	repo, err = git.PlainInit(tmp, true)
	if err != nil {
		return nil, fmt.Errorf("worktree: create mirror %s: %w", r, err)
	}
	cfg, err := repo.Config()
	if err != nil {
		return nil, fmt.Errorf("worktree: mirror config %s: %w", r, err)
	}
	// The URL carries no credential; it is given per operation.
	cfg.Remotes["origin"] = &config.RemoteConfig{Name: "origin", URLs: []string{m.remoteURL(r)}, Fetch: []config.RefSpec{headsSpec}}
	// Session worktrees borrow the mirror's objects through alternates; an
	// automatic gc by a git CLI run in the mirror must never repack them away.
	cfg.Raw.Section("gc").SetOption("auto", "0")
	if err := repo.SetConfig(cfg); err != nil {
		return nil, fmt.Errorf("worktree: mirror config %s: %w", r, err)
	}
	if err := m.fetch(ctx, repo, r, c, headsSpec); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("worktree: create mirror %s: %w", r, err)
	}
	if err := syncParent(dir); err != nil {
		return nil, fmt.Errorf("worktree: create mirror %s: %w", r, err)
	}
	repo, err = git.PlainOpen(dir)
	if err != nil {
		return nil, fmt.Errorf("worktree: open mirror %s: %w", r, err)
	}
	return repo, nil
}

// mirrorTmpSuffix names a mirror being created aside.
const mirrorTmpSuffix = ".creating-"

// cleanPacks removes from a mirror's objects/pack what a fetch killed
// half-way leaves: go-git writes the pack to a temporary file, then the
// index in place, then renames the pack next to it, so a kill leaves a
// tmp_ file, or an index (possibly torn) without its pack. A later fetch
// of the same objects (the refs were not updated, so it fetches them
// again) would keep the torn index as it is — the pack's name is its
// checksum, and go-git skips an index that exists — and every later read
// of the mirror would fail. The caller holds the mirror lock, so no other
// fetch is writing; readers use a pack only with its index.
func cleanPacks(mirror string) error {
	dir := filepath.Join(mirror, "objects", "pack")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, e := range ents {
		have[e.Name()] = true
	}
	for _, e := range ents {
		name := e.Name()
		stray := strings.HasPrefix(name, "tmp_")
		if base, ok := strings.CutSuffix(name, ".idx"); ok && !have[base+".pack"] {
			stray = true
		}
		if stray {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// syncParent makes a rename into path's directory durable.
func syncParent(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// fetch updates the mirror from the remote with specs. It reports
// ErrNotFound when a non-wildcard spec names a ref the remote lacks.
func (m *Manager) fetch(ctx context.Context, mirror *git.Repository, r Repo, c cred, specs ...config.RefSpec) error {
	err := mirror.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RemoteURL:  m.remoteURL(r),
		RefSpecs:   specs,
		Auth:       c.auth(),
		Tags:       git.NoTags,
		// A branch deleted on the remote (a merged session branch) must not
		// live on in the mirror and be "resumed".
		Prune: true,
	})
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		return nil
	case errors.Is(err, git.NoMatchingRefSpecError{}):
		return c.wrap("fetch "+r.String(), fmt.Errorf("%w: %v", ErrNotFound, err))
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return nil
	default:
		return c.wrap("fetch "+r.String(), err)
	}
}

// defaultBranch asks the remote which branch its HEAD names.
func (m *Manager) defaultBranch(ctx context.Context, r Repo, c cred) (string, error) {
	refs, err := m.advertised(ctx, r, c, "default branch of "+r.String())
	if err != nil {
		return "", err
	}
	head, err := refs.Reference(plumbing.HEAD)
	if err != nil || head.Type() != plumbing.SymbolicReference || !head.Target().IsBranch() {
		return "", fmt.Errorf("%w: %s advertises no default branch", ErrNotFound, r)
	}
	return head.Target().Short(), nil
}

// RemoteBranches lists the remote's branches whose names start with
// prefix, sorted, as the remote advertises them now: one round trip, no
// objects fetched.
func (m *Manager) RemoteBranches(ctx context.Context, r Repo, prefix string) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	c, err := m.cred(ctx, r)
	if err != nil {
		return nil, err
	}
	refs, err := m.advertised(ctx, r, c, "branches of "+r.String())
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	iter, err := refs.IterReferences()
	if err != nil {
		return nil, c.wrap("branches of "+r.String(), err)
	}
	var out []string
	err = iter.ForEach(func(ref *plumbing.Reference) error {
		if name := ref.Name(); name.IsBranch() && strings.HasPrefix(name.Short(), prefix) {
			out = append(out, name.Short())
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// advertised returns the references the remote advertises to a fetch.
func (m *Manager) advertised(ctx context.Context, r Repo, c cred, op string) (storer.ReferenceStorer, error) {
	ep, err := transport.NewEndpoint(m.remoteURL(r))
	if err != nil {
		return nil, c.wrap(op, err)
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return nil, c.wrap(op, err)
	}
	s, err := cl.NewUploadPackSession(ep, c.auth())
	if err != nil {
		return nil, c.wrap(op, err)
	}
	defer s.Close()
	ar, err := s.AdvertisedReferencesContext(ctx)
	if err != nil {
		return nil, c.wrap(op, err)
	}
	refs, err := ar.AllReferences()
	if err != nil {
		return nil, c.wrap(op, err)
	}
	return refs, nil
}
