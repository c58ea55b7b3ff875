package worktree

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Artifact file names inside a session's artifact directory.
const (
	EventsFile   = "events.jsonl"
	SnapshotFile = "snapshot.json"
)

// Artifact is one commit of a session's durable state.
type Artifact struct {
	Repo      Repo
	SessionID string
	RunID     string
	// Events is the session's events.jsonl, Snapshot its snapshot.json.
	Events   []byte
	Snapshot []byte
	// Time is the commit time; zero means now.
	Time time.Time
}

// ArtifactDir is the directory of a session's artifact on the artifact
// branch.
func ArtifactDir(sessionID string) string { return "sessions/" + sessionID }

// file is one blob to place in a tree.
type file struct {
	name string
	data []byte
}

// CommitArtifact commits the session's events.jsonl and snapshot.json to
// sessions/<id>/ on the artifact branch (an orphan branch created on first
// use) and pushes it, returning the commit's SHA so that a pull request can
// link the log at exactly that commit. Other sessions' files on the branch
// are kept: when another writer moved the branch first, the commit is
// rebuilt on the new tip and pushed again, up to Config.PushRetries times
// (then ErrConflict). Committing bytes identical to the tip's returns the
// tip without a new commit.
func (m *Manager) CommitArtifact(ctx context.Context, a Artifact) (string, error) {
	if err := a.Repo.Validate(); err != nil {
		return "", err
	}
	if !validSessionID(a.SessionID) {
		return "", fmt.Errorf("%w: session id %q", ErrInvalid, a.SessionID)
	}
	if strings.ContainsAny(a.RunID, "\n\r") {
		return "", fmt.Errorf("%w: run id %q", ErrInvalid, a.RunID)
	}
	c, err := m.cred(ctx, a.Repo)
	if err != nil {
		return "", err
	}
	unlock, err := m.lockMirror(ctx, m.mirrorDir(a.Repo))
	if err != nil {
		return "", err
	}
	defer unlock()
	mirror, err := m.openMirror(ctx, a.Repo, c)
	if err != nil {
		return "", err
	}
	when := a.Time
	if when.IsZero() {
		when = time.Now()
	}
	branch := m.cfg.ArtifactBranch
	ref := plumbing.NewBranchReferenceName(branch)
	files := []file{{EventsFile, a.Events}, {SnapshotFile, a.Snapshot}}
	msg := commitMessage("agentos: session "+a.SessionID+" artifact", a.SessionID, a.RunID)
	author, err := m.author(ctx, a.Repo)
	if err != nil {
		return "", err
	}
	sig := object.Signature{Name: author.Name, Email: author.Email, When: when}

	for attempt := 0; attempt <= m.cfg.PushRetries; attempt++ {
		tip, err := m.fetchBranch(ctx, mirror, a.Repo, c, branch)
		if err != nil {
			return "", err
		}
		newHash, changed, err := buildCommit(mirror.Storer, tip, []string{"sessions", a.SessionID}, files, msg, sig)
		if err != nil {
			return "", fmt.Errorf("worktree: artifact commit: %w", err)
		}
		if !changed {
			return tip.String(), nil
		}
		if api := m.gitDataFor(c); api != nil {
			// Through the Git Data API, as the session branch is
			// published (publish.go): GitHub makes and signs the commit.
			head, err := m.publishArtifactAPI(ctx, api, mirror.Storer, a.Repo, branch, tip, newHash, ArtifactDir(a.SessionID), files)
			if errors.Is(err, ErrRefExists) || errors.Is(err, ErrNotFastForward) {
				continue // the branch moved meanwhile: rebuild on its new tip
			}
			if err != nil {
				return "", c.wrap("publish "+branch+" through the Git Data API", err)
			}
			// GitHub's commit is not in the mirror yet: fetch it (another
			// writer may have moved the branch past it already; a retry
			// after a failed fetch finds the tree there and commits
			// nothing).
			if _, err := m.fetchBranch(ctx, mirror, a.Repo, c, branch); err != nil {
				return "", err
			}
			return head.String(), nil
		}
		lease := tip
		err = push(ctx, mirror.Storer, c, pushRequest{url: m.remoteURL(a.Repo), branch: branch, new: newHash, lease: &lease})
		if err == nil {
			if err := mirror.Storer.SetReference(plumbing.NewHashReference(ref, newHash)); err != nil {
				return "", fmt.Errorf("worktree: artifact ref: %w", err)
			}
			return newHash.String(), nil
		}
		if errors.Is(err, errStale) {
			continue
		}
		// The server may have refused the update because the tip moved
		// between its advertisement and our update; only a moved tip is
		// worth another try.
		now, ferr := m.fetchBranch(ctx, mirror, a.Repo, c, branch)
		if ferr != nil || now == tip {
			return "", err
		}
	}
	return "", fmt.Errorf("%w: %s after %d attempts", ErrConflict, branch, m.cfg.PushRetries+1)
}

// publishArtifactAPI re-creates the artifact commit local (built on tip,
// placing files under dir) through the Git Data API: the files inside the
// tree request (a blob of its own for one too long or not text), the tree
// on tip's tree, a commit GitHub makes and signs, and the branch
// created (tip zero: the orphan branch's first commit) or moved, never
// forced. It returns GitHub's commit. ErrRefExists or ErrNotFastForward
// mean another writer moved the branch first.
func (m *Manager) publishArtifactAPI(ctx context.Context, api GitDataAPI, st storer.EncodedObjectStorer, r Repo, branch string, tip, local plumbing.Hash, dir string, files []file) (plumbing.Hash, error) {
	lc, err := object.GetCommit(st, local)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", local, err)
	}
	base := ""
	var parents []string
	if !tip.IsZero() {
		tc, err := object.GetCommit(st, tip)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", tip, err)
		}
		base, parents = tc.TreeHash.String(), []string{tip.String()}
	}
	if bc, ok := api.(BranchCommitAPI); ok && !tip.IsZero() {
		// The branch is there: one call commits the files and moves it.
		changes := make([]TreeEntry, 0, len(files))
		for _, f := range files {
			changes = append(changes, TreeEntry{Path: dir + "/" + f.name, Mode: "100644", Content: f.data})
		}
		sha, tree, err := bc.CommitOnBranch(ctx, r, branch, tip.String(), lc.Message, changes)
		switch {
		case errors.Is(err, ErrCannotCommitOnBranch):
			// the Git Data API below
		case err != nil:
			return plumbing.ZeroHash, err
		case tree != lc.TreeHash.String():
			return plumbing.ZeroHash, fmt.Errorf("GitHub built tree %s for the artifact commit, whose tree is %s", tree, lc.TreeHash)
		default:
			h := plumbing.NewHash(sha)
			if len(sha) != 40 || h.String() != sha {
				return plumbing.ZeroHash, fmt.Errorf("GitHub answered commit %q, not a SHA", sha)
			}
			return h, nil
		}
	}
	entries := make([]TreeEntry, 0, len(files))
	for _, f := range files {
		e := TreeEntry{Path: dir + "/" + f.name, Mode: "100644"}
		if inlineText(f.data) {
			e.Content = f.data // inside the tree request: no call of its own
		} else {
			// A long log: a base64 blob of its own.
			sha, err := api.CreateBlob(ctx, r, f.data)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			e.SHA = sha
		}
		entries = append(entries, e)
	}
	tree, err := api.CreateTree(ctx, r, base, entries)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if tree != lc.TreeHash.String() {
		return plumbing.ZeroHash, fmt.Errorf("GitHub built tree %s for the artifact commit, whose tree is %s", tree, lc.TreeHash)
	}
	sha, err := api.CreateCommit(ctx, r, lc.Message, tree, parents)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h := plumbing.NewHash(sha)
	if len(sha) != 40 || h.String() != sha {
		return plumbing.ZeroHash, fmt.Errorf("GitHub answered commit %q, not a SHA", sha)
	}
	if tip.IsZero() {
		err = api.CreateRef(ctx, r, branch, sha)
	} else {
		err = api.UpdateRef(ctx, r, branch, sha)
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return h, nil
}

// fetchBranch updates the mirror's copy of branch and returns its tip, or
// the zero hash when the remote has no such branch (the local copy is then
// dropped too, so a deleted branch is recreated as an orphan).
func (m *Manager) fetchBranch(ctx context.Context, mirror *git.Repository, r Repo, c cred, branch string) (plumbing.Hash, error) {
	ref := plumbing.NewBranchReferenceName(branch)
	err := m.fetch(ctx, mirror, r, c, config.RefSpec("+"+ref+":"+ref))
	if errors.Is(err, ErrNotFound) {
		if err := mirror.Storer.RemoveReference(ref); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("worktree: drop %s: %w", ref, err)
		}
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	got, err := mirror.Storer.Reference(ref)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil // the remote is empty
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("worktree: read %s: %w", ref, err)
	}
	return got.Hash(), nil
}

// buildCommit writes a commit whose tree is parent's tree with files placed
// under dir (replacing what was there under those names), and reports
// whether that tree differs from parent's. A zero parent makes a root
// commit.
func buildCommit(s storer.EncodedObjectStorer, parent plumbing.Hash, dir []string, files []file, msg string, sig object.Signature) (plumbing.Hash, bool, error) {
	var parentTree plumbing.Hash
	var parents []plumbing.Hash
	if !parent.IsZero() {
		pc, err := object.GetCommit(s, parent)
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("read %s: %w", parent, err)
		}
		parentTree = pc.TreeHash
		parents = []plumbing.Hash{parent}
	}
	tree, err := putFiles(s, parentTree, dir, files)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	if tree == parentTree && !parent.IsZero() {
		return parent, false, nil
	}
	commit := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree, ParentHashes: parents}
	obj := s.NewEncodedObject()
	if err := commit.Encode(obj); err != nil {
		return plumbing.ZeroHash, false, err
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	return h, true, nil
}

// putFiles writes the tree base with files set under dir and returns its
// hash; base may be zero (an empty tree). Only the trees along dir are
// rewritten.
func putFiles(s storer.EncodedObjectStorer, base plumbing.Hash, dir []string, files []file) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !base.IsZero() {
		t, err := object.GetTree(s, base)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read tree %s: %w", base, err)
		}
		entries = append(entries, t.Entries...)
	}
	upsert := func(e object.TreeEntry) {
		for i := range entries {
			if entries[i].Name == e.Name {
				entries[i] = e
				return
			}
		}
		entries = append(entries, e)
	}
	if len(dir) == 0 {
		for _, f := range files {
			obj := s.NewEncodedObject()
			obj.SetType(plumbing.BlobObject)
			w, err := obj.Writer()
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if _, err := w.Write(f.data); err != nil {
				return plumbing.ZeroHash, err
			}
			if err := w.Close(); err != nil {
				return plumbing.ZeroHash, err
			}
			h, err := s.SetEncodedObject(obj)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			upsert(object.TreeEntry{Name: f.name, Mode: filemode.Regular, Hash: h})
		}
	} else {
		var child plumbing.Hash
		for _, e := range entries {
			if e.Name == dir[0] && e.Mode == filemode.Dir {
				child = e.Hash
			}
		}
		h, err := putFiles(s, child, dir[1:], files)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		upsert(object.TreeEntry{Name: dir[0], Mode: filemode.Dir, Hash: h})
	}
	sortTreeEntries(entries)
	t := &object.Tree{Entries: entries}
	obj := s.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(obj)
}

// LoadArtifact fetches the artifact branch and returns the session's
// events.jsonl as committed there (ErrNotFound when the branch or the
// session's log is missing). A later run resumes from these bytes.
func (m *Manager) LoadArtifact(ctx context.Context, repo Repo, sessionID string) ([]byte, error) {
	if err := repo.Validate(); err != nil {
		return nil, err
	}
	if !validSessionID(sessionID) {
		return nil, fmt.Errorf("%w: session id %q", ErrInvalid, sessionID)
	}
	c, err := m.cred(ctx, repo)
	if err != nil {
		return nil, err
	}
	unlock, err := m.lockMirror(ctx, m.mirrorDir(repo))
	if err != nil {
		return nil, err
	}
	defer unlock()
	mirror, err := m.openMirror(ctx, repo, c)
	if err != nil {
		return nil, err
	}
	tip, err := m.fetchBranch(ctx, mirror, repo, c, m.cfg.ArtifactBranch)
	if err != nil {
		return nil, err
	}
	if tip.IsZero() {
		return nil, fmt.Errorf("%w: %s has no branch %s", ErrNotFound, repo, m.cfg.ArtifactBranch)
	}
	commit, err := object.GetCommit(mirror.Storer, tip)
	if err != nil {
		return nil, fmt.Errorf("worktree: read %s: %w", tip, err)
	}
	b, err := readFile(commit, ArtifactDir(sessionID)+"/"+EventsFile)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: no artifact for session %s on %s", ErrNotFound, sessionID, m.cfg.ArtifactBranch)
	}
	return b, err
}
