package worktree

import (
	"context"
	"errors"
	"fmt"
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
func (m *Manager) openMirror(r Repo) (*git.Repository, error) {
	dir := m.mirrorDir(r)
	repo, err := git.PlainOpen(dir)
	if err == nil {
		return repo, nil
	}
	if !errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, fmt.Errorf("worktree: open mirror %s: %w", r, err)
	}
	repo, err = git.PlainInit(dir, true)
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
	return repo, nil
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
