package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Publishing a session branch: the session's commits are made locally and
// then published, either pushed over git (gitPush) or re-created through
// GitHub's Git Data API (apiPublish). GitHub signs a commit an app creates
// through the API without naming an author or committer, and shows it as
// Verified; a commit pushed over git carries no signature. Which one runs
// is decided per operation from the credential (Config.Publish).

// PublishMode selects how a session branch reaches the remote.
type PublishMode int

const (
	// PublishAuto publishes through the Git Data API when Config.GitData is
	// set and the credential is a GitHub App installation token (ghs_…,
	// which GITHUB_TOKEN in Actions also is), and pushes over git
	// otherwise (a personal access token, the CLI).
	PublishAuto PublishMode = iota
	// PublishGit always pushes over git.
	PublishGit
	// PublishAPI always publishes through Config.GitData.
	PublishAPI
)

// InstallationToken reports whether token is a GitHub App installation
// token, the credential under which GitHub signs API-made commits.
func InstallationToken(token string) bool { return strings.HasPrefix(token, "ghs_") }

// Errors of a GitDataAPI that the publisher branches on; an implementation
// wraps GitHub's 422 answers into them.
var (
	// ErrRefExists: creating a branch that already exists ("Reference
	// already exists").
	ErrRefExists = errors.New("worktree: the branch already exists on the remote")
	// ErrNotFastForward: a ref update that would not fast-forward
	// ("Update is not a fast forward").
	ErrNotFastForward = errors.New("worktree: the remote branch update is not a fast-forward")
)

// TreeEntry is one entry of a Git Data API tree on a base tree: Path set
// to a blob (SHA, or Content) with Mode (100644, 100755 or 120000), or
// deleted.
type TreeEntry struct {
	Path string
	Mode string
	SHA  string
	// Content, when set instead of SHA, is the file's text (valid UTF-8):
	// GitHub writes the blob itself.
	Content []byte
	Delete  bool // "sha": null removes Path from the base tree
}

// GitDataAPI is the part of GitHub's Git Data API the API publisher uses.
// Implementations authenticate per repository themselves. CreateCommit
// must not name an author or a committer: GitHub then makes the commit the
// caller's and signs it.
type GitDataAPI interface {
	CreateBlob(ctx context.Context, repo Repo, content []byte) (sha string, err error)
	CreateTree(ctx context.Context, repo Repo, baseTree string, entries []TreeEntry) (sha string, err error)
	CreateCommit(ctx context.Context, repo Repo, message, tree string, parents []string) (sha string, err error)
	// CreateRef creates refs/heads/<branch> at sha (ErrRefExists when it
	// exists).
	CreateRef(ctx context.Context, repo Repo, branch, sha string) error
	// UpdateRef moves refs/heads/<branch> to sha, never forced
	// (ErrNotFastForward when sha does not descend from the tip).
	UpdateRef(ctx context.Context, repo Repo, branch, sha string) error
}

// BranchCommitAPI is a GitDataAPI that can also append a commit to a
// branch the remote has and move the branch, in one call (GitHub's
// GraphQL createCommitOnBranch, whose commits GitHub signs as well). The
// publisher uses it for a commit whose changes are regular files only
// (mode 100644 before and after, no file replacing a directory or the
// reverse); a new branch, an executable bit, a symbolic link, or changes
// the implementation refuses with ErrCannotCommitOnBranch go through the
// Git Data API.
type BranchCommitAPI interface {
	// CommitOnBranch appends a commit of message and changes (entries
	// with Content, mode 100644, or Delete) to branch, which must be at
	// head, moves the branch to it and returns the commit and its tree.
	// ErrNotFastForward when the branch is not at head (nothing was
	// committed).
	CommitOnBranch(ctx context.Context, repo Repo, branch, head, message string, changes []TreeEntry) (sha, tree string, err error)
}

// ErrCannotCommitOnBranch: a BranchCommitAPI cannot express the changes
// (too large for one request, say) and made no call; the publisher uses
// the Git Data API instead.
var ErrCannotCommitOnBranch = errors.New("worktree: the changes cannot be committed in one call")

// publisher sends the session branch's local tip to the remote branch and
// returns the remote tip that holds it: the tip itself when pushed over
// git, the commit GitHub made when published through the API.
type publisher interface {
	publish(ctx context.Context, s *Session, c cred, tip plumbing.Hash) (plumbing.Hash, error)
}

// publisherFor picks the publisher of one operation.
func (m *Manager) publisherFor(c cred) publisher {
	switch {
	case m.cfg.GitData == nil || m.cfg.Publish == PublishGit:
		return gitPush{}
	case m.cfg.Publish == PublishAPI || InstallationToken(c.token):
		return apiPublish{api: m.cfg.GitData}
	}
	return gitPush{}
}

// gitDataFor is the Git Data API an operation under c publishes through,
// by the same rule as publisherFor; nil: push over git.
func (m *Manager) gitDataFor(c cred) GitDataAPI {
	if p, ok := m.publisherFor(c).(apiPublish); ok {
		return p.api
	}
	return nil
}

// gitPush pushes over git; the update must fast-forward the remote branch.
type gitPush struct{}

func (gitPush) publish(ctx context.Context, s *Session, c cred, tip plumbing.Hash) (plumbing.Hash, error) {
	st := s.m.openStorage(s.repo, s.Dir)
	defer st.Close()
	if err := push(ctx, st, c, pushRequest{url: s.m.remoteURL(s.repo), branch: s.Branch, new: tip, known: s.known}); err != nil {
		return plumbing.ZeroHash, err
	}
	return tip, nil
}

// apiPublishAttempts bounds the rounds of an API publication that lost a
// race for the branch (a ref created or moved meanwhile): each round looks
// at the remote branch again.
const apiPublishAttempts = 3

// apiPublish re-creates the session's new commits through the Git Data
// API, one remote commit per local one (same tree, same message, same
// first parent as mapped), then moves the branch; the local branch is then
// set to the remote commits, so the worktree and the remote agree.
//
// It is idempotent: the remote commits that already hold the trees of the
// local commits, in order, count as published (a publication cut short
// after the branch moved, retried by another process or after a lost
// answer), so nothing is created twice. A remote branch holding anything
// else fails as a push would (non-fast-forward).
type apiPublish struct {
	api GitDataAPI
}

func (p apiPublish) publish(ctx context.Context, s *Session, c cred, tip plumbing.Hash) (plumbing.Hash, error) {
	op := "publish " + s.Branch + " through the Git Data API"
	var last error
	for attempt := 0; attempt < apiPublishAttempts; attempt++ {
		remote, err := s.fetchBranch(ctx, c)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		head, err := p.round(ctx, s, tip, remote)
		if errors.Is(err, ErrRefExists) || errors.Is(err, ErrNotFastForward) {
			last = err // the branch moved meanwhile: look again
			continue
		}
		if err != nil {
			return plumbing.ZeroHash, c.wrap(op, err)
		}
		if head != remote {
			// The new commits are GitHub's objects now: fetch them so
			// that the local branch can point at them.
			if _, err := s.fetchBranch(ctx, c); err != nil {
				return plumbing.ZeroHash, err
			}
		}
		if err := s.adopt(tip, head); err != nil {
			return plumbing.ZeroHash, c.wrap(op, err)
		}
		return head, nil
	}
	return plumbing.ZeroHash, c.wrap(op, fmt.Errorf("%w: %v", errStale, last))
}

// round publishes what the remote (at remote, zero when the branch does
// not exist) lacks of the local history up to tip and returns the remote
// branch's new tip.
func (p apiPublish) round(ctx context.Context, s *Session, tip, remote plumbing.Hash) (plumbing.Hash, error) {
	st := s.m.openStorage(s.repo, s.Dir)
	defer st.Close()
	if tip == remote {
		return tip, nil
	}
	local, base, err := s.unpublished(st, tip, remote)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	parent := base
	if !remote.IsZero() && remote != base {
		// Commits on the remote after base: those that hold the local
		// commits' trees in order were published already.
		theirs, err := commitsSince(st, remote, base)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if len(theirs) > len(local) {
			return plumbing.ZeroHash, fmt.Errorf("%w: remote %s is at %s, ahead of the local %s", errStale, s.Branch, remote, tip)
		}
		for i, rc := range theirs {
			if rc.TreeHash != local[i].TreeHash {
				return plumbing.ZeroHash, fmt.Errorf("%w: remote %s is at %s, which the local %s does not contain (non-fast-forward)", errStale, s.Branch, remote, tip)
			}
		}
		local = local[len(theirs):]
		parent = remote
	}
	if len(local) == 0 {
		return remote, nil // all of it is there already
	}
	moved := remote // where the remote branch is now
	bc, _ := p.api.(BranchCommitAPI)
	for _, lc := range local {
		if bc != nil && !moved.IsZero() && parent == moved {
			// The branch is at the parent: one call commits and moves it.
			h, ok, err := p.commitOnBranch(ctx, s, st, bc, lc, parent)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			if ok {
				parent, moved = h, h
				continue
			}
		}
		if parent, err = p.recreate(ctx, s, st, lc, parent); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	switch {
	case parent == moved:
		return parent, nil
	case moved.IsZero():
		err = p.api.CreateRef(ctx, s.repo, s.Branch, parent.String())
	default:
		err = p.api.UpdateRef(ctx, s.repo, s.Branch, parent.String())
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return parent, nil
}

// commitOnBranch makes lc's change on the remote branch, which is at
// parent, in one call, when its changes are regular files only; false
// (and no call) when they are not, or when bc cannot take them. The tree
// GitHub builds must be lc's tree to the byte.
func (p apiPublish) commitOnBranch(ctx context.Context, s *Session, st storer.EncodedObjectStorer, bc BranchCommitAPI, lc *object.Commit, parent plumbing.Hash) (plumbing.Hash, bool, error) {
	if len(lc.ParentHashes) != 1 {
		return plumbing.ZeroHash, false, nil // recreate says why
	}
	lp, err := object.GetCommit(st, lc.ParentHashes[0])
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("read commit %s: %w", lc.ParentHashes[0], err)
	}
	changes, ok, err := regularChanges(ctx, st, lp.TreeHash, lc.TreeHash)
	if err != nil || !ok {
		return plumbing.ZeroHash, false, err
	}
	sha, tree, err := bc.CommitOnBranch(ctx, s.repo, s.Branch, parent.String(), lc.Message, changes)
	if errors.Is(err, ErrCannotCommitOnBranch) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	h := plumbing.NewHash(sha)
	if len(sha) != 40 || h.String() != sha {
		return plumbing.ZeroHash, false, fmt.Errorf("GitHub answered commit %q, not a SHA", sha)
	}
	if tree != lc.TreeHash.String() {
		return plumbing.ZeroHash, false, fmt.Errorf("GitHub built tree %s for commit %s, whose tree is %s", tree, lc.Hash, lc.TreeHash)
	}
	return h, true, nil
}

// regularChanges lists the changes that turn tree from into tree to as
// one-call commit entries (the content of every file written, every file
// removed), and false when one needs more than that: a mode other than
// 100644 before or after, or a file replacing a directory (or the
// reverse).
func regularChanges(ctx context.Context, st storer.EncodedObjectStorer, from, to plumbing.Hash) ([]TreeEntry, bool, error) {
	ft, err := object.GetTree(st, from)
	if err != nil {
		return nil, false, fmt.Errorf("read tree %s: %w", from, err)
	}
	tt, err := object.GetTree(st, to)
	if err != nil {
		return nil, false, fmt.Errorf("read tree %s: %w", to, err)
	}
	diff, err := object.DiffTreeWithOptions(ctx, ft, tt, &object.DiffTreeOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("diff %s %s: %w", from, to, err)
	}
	regular := func(m filemode.FileMode) bool { return m == filemode.Regular || m == filemode.Deprecated }
	var out []TreeEntry
	paths := map[string]bool{}
	for _, ch := range diff {
		if ch.From.Name != "" {
			if !regular(ch.From.TreeEntry.Mode) {
				return nil, false, nil
			}
			if ch.From.Name != ch.To.Name {
				out = append(out, TreeEntry{Path: ch.From.Name, Delete: true})
				paths[ch.From.Name] = true
			}
		}
		if ch.To.Name == "" {
			continue
		}
		if !regular(ch.To.TreeEntry.Mode) {
			return nil, false, nil
		}
		blob, err := object.GetBlob(st, ch.To.TreeEntry.Hash)
		if err != nil {
			return nil, false, fmt.Errorf("read blob %s of %s: %w", ch.To.TreeEntry.Hash, ch.To.Name, err)
		}
		data, err := blobBytes(blob)
		if err != nil {
			return nil, false, fmt.Errorf("read blob %s of %s: %w", ch.To.TreeEntry.Hash, ch.To.Name, err)
		}
		out = append(out, TreeEntry{Path: ch.To.Name, Mode: "100644", Content: data})
		paths[ch.To.Name] = true
	}
	for p := range paths {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if paths[d] {
				return nil, false, nil // a file and a directory of one name
			}
		}
	}
	return out, true, nil
}

// recreate makes lc's change on top of the remote commit parent: a blob
// per written file, a tree on the parent's, a commit with lc's message
// and no author or committer. The tree GitHub builds must be lc's tree to
// the byte; anything else is refused.
func (p apiPublish) recreate(ctx context.Context, s *Session, st storer.EncodedObjectStorer, lc *object.Commit, parent plumbing.Hash) (plumbing.Hash, error) {
	if len(lc.ParentHashes) != 1 {
		return plumbing.ZeroHash, fmt.Errorf("%w: commit %s has %d parents; the Git Data API publisher takes a linear history", ErrInvalid, lc.Hash, len(lc.ParentHashes))
	}
	lp, err := object.GetCommit(st, lc.ParentHashes[0])
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", lc.ParentHashes[0], err)
	}
	tree := lc.TreeHash
	if lp.TreeHash != lc.TreeHash {
		entries, err := p.entries(ctx, s, st, lp.TreeHash, lc.TreeHash)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		sha, err := p.api.CreateTree(ctx, s.repo, lp.TreeHash.String(), entries)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if sha != lc.TreeHash.String() {
			return plumbing.ZeroHash, fmt.Errorf("GitHub built tree %s for commit %s, whose tree is %s", sha, lc.Hash, lc.TreeHash)
		}
	}
	sha, err := p.api.CreateCommit(ctx, s.repo, lc.Message, tree.String(), []string{parent.String()})
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h := plumbing.NewHash(sha)
	if len(sha) != 40 || h.String() != sha {
		return plumbing.ZeroHash, fmt.Errorf("GitHub answered commit %q, not a SHA", sha)
	}
	return h, nil
}

// entries lists the tree entries that turn tree from into tree to: small
// text files with their content, a blob created for every other file
// written (base64, so binary content is kept) and a deletion for every file removed; a changed mode alone names
// the blob the base tree has.
func (p apiPublish) entries(ctx context.Context, s *Session, st storer.EncodedObjectStorer, from, to plumbing.Hash) ([]TreeEntry, error) {
	ft, err := object.GetTree(st, from)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", from, err)
	}
	tt, err := object.GetTree(st, to)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", to, err)
	}
	changes, err := object.DiffTreeWithOptions(ctx, ft, tt, &object.DiffTreeOptions{})
	if err != nil {
		return nil, fmt.Errorf("diff %s %s: %w", from, to, err)
	}
	var dels, sets []TreeEntry
	blobs := map[plumbing.Hash]string{} // local blob → GitHub's SHA
	for _, ch := range changes {
		if ch.To.Name == "" { // removed
			dels = append(dels, TreeEntry{Path: ch.From.Name, Delete: true})
			continue
		}
		if ch.From.Name != "" && ch.From.Name != ch.To.Name {
			dels = append(dels, TreeEntry{Path: ch.From.Name, Delete: true})
		}
		e := ch.To.TreeEntry
		mode, ok := apiModes[e.Mode]
		if !ok {
			return nil, fmt.Errorf("%w: %s has mode %s; the Git Data API publisher writes files and symbolic links only", ErrInvalid, ch.To.Name, e.Mode)
		}
		if ch.From.Name == ch.To.Name && ch.From.TreeEntry.Hash == e.Hash {
			blobs[e.Hash] = e.Hash.String() // a mode change: the base tree has the blob
		}
		sha, ok := blobs[e.Hash]
		if !ok {
			blob, err := object.GetBlob(st, e.Hash)
			if err != nil {
				return nil, fmt.Errorf("read blob %s of %s: %w", e.Hash, ch.To.Name, err)
			}
			data, err := blobBytes(blob)
			if err != nil {
				return nil, fmt.Errorf("read blob %s of %s: %w", e.Hash, ch.To.Name, err)
			}
			if mode != "120000" && inlineText(data) {
				// Small text goes in the tree request itself: one call
				// less per file. The tree's SHA check still covers it.
				sets = append(sets, TreeEntry{Path: ch.To.Name, Mode: mode, Content: data})
				continue
			}
			if sha, err = p.api.CreateBlob(ctx, s.repo, data); err != nil {
				return nil, err
			}
			if sha != e.Hash.String() {
				return nil, fmt.Errorf("GitHub stored %s as blob %s, want %s", ch.To.Name, sha, e.Hash)
			}
			blobs[e.Hash] = sha
		}
		sets = append(sets, TreeEntry{Path: ch.To.Name, Mode: mode, SHA: sha})
	}
	// Deletions first: a file replaced by a directory of the same name
	// (or the reverse) is removed before the new path is written.
	return append(dels, sets...), nil
}

// maxInline is the largest file sent as a tree entry's content rather
// than as a blob of its own.
const maxInline = 256 << 10

// inlineText reports whether data can travel as a tree entry's content:
// GitHub takes it as a UTF-8 string, so only valid UTF-8 without NUL
// bytes, and not too large; anything else is a base64 blob.
func inlineText(data []byte) bool {
	return len(data) <= maxInline && utf8.Valid(data) && bytes.IndexByte(data, 0) < 0
}

// apiModes are the modes a tree entry of the publisher may have.
var apiModes = map[filemode.FileMode]string{
	filemode.Regular:    "100644",
	filemode.Deprecated: "100644",
	filemode.Executable: "100755",
	filemode.Symlink:    "120000",
}

func blobBytes(b *object.Blob) ([]byte, error) {
	r, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// unpublished walks back from tip along first parents to the first commit
// the remote has (base: remote itself, one of its ancestors, or a commit
// the session knows the remote has) and returns the commits after it,
// oldest first.
func (s *Session) unpublished(st storer.EncodedObjectStorer, tip, remote plumbing.Hash) ([]*object.Commit, plumbing.Hash, error) {
	known := map[plumbing.Hash]bool{}
	for _, h := range s.known {
		known[h] = true
	}
	if !remote.IsZero() {
		// The remote branch's own line back to a commit the session
		// knows: a local commit on it is there.
		h := remote
		for n := 0; n < maxWalk && !known[h]; n++ {
			known[h] = true
			c, err := object.GetCommit(st, h)
			if err != nil {
				return nil, plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", h, err)
			}
			if len(c.ParentHashes) == 0 {
				break
			}
			h = c.ParentHashes[0]
		}
	}
	var out []*object.Commit
	h := tip
	for n := 0; ; n++ {
		if known[h] {
			break
		}
		if n >= maxWalk {
			return nil, plumbing.ZeroHash, fmt.Errorf("more than %d commits to publish on %s", maxWalk, s.Branch)
		}
		c, err := object.GetCommit(st, h)
		if err != nil {
			return nil, plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", h, err)
		}
		if len(c.ParentHashes) != 1 {
			return nil, plumbing.ZeroHash, fmt.Errorf("%w: commit %s has %d parents and none the remote has; the Git Data API publisher takes a linear history", ErrInvalid, h, len(c.ParentHashes))
		}
		out = append(out, c)
		h = c.ParentHashes[0]
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, h, nil
}

// commitsSince lists the first-parent commits after base up to tip, oldest
// first; base must be on that line.
func commitsSince(st storer.EncodedObjectStorer, tip, base plumbing.Hash) ([]*object.Commit, error) {
	var out []*object.Commit
	for h, n := tip, 0; h != base; n++ {
		if n >= maxWalk {
			return nil, fmt.Errorf("%w: %s is not within %d commits of %s", errStale, base, maxWalk, tip)
		}
		c, err := object.GetCommit(st, h)
		if err != nil {
			return nil, fmt.Errorf("read commit %s: %w", h, err)
		}
		out = append(out, c)
		if len(c.ParentHashes) == 0 {
			return nil, fmt.Errorf("%w: the remote branch at %s does not descend from %s", errStale, tip, base)
		}
		h = c.ParentHashes[0]
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// fetchBranch brings the remote's branches into the mirror and returns
// where the session branch is (zero when the remote has no such branch).
func (s *Session) fetchBranch(ctx context.Context, c cred) (plumbing.Hash, error) {
	dir := s.m.mirrorDir(s.repo)
	unlock, err := s.m.lockMirror(ctx, dir)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer unlock()
	mirror, err := s.m.openMirror(ctx, s.repo, c)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := s.m.fetch(ctx, mirror, s.repo, c, headsSpec); err != nil {
		return plumbing.ZeroHash, err
	}
	ref, err := mirror.Reference(plumbing.NewBranchReferenceName(s.Branch), true)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, c.wrap("read "+s.Branch, err)
	}
	return ref.Hash(), nil
}

// adopt points the local session branch at head, the remote commit that
// holds the local tip's tree: the working tree and the index stay as they
// are, since they match that tree already.
func (s *Session) adopt(tip, head plumbing.Hash) error {
	st := s.m.openStorage(s.repo, s.Dir)
	defer st.Close()
	if head == tip {
		return nil
	}
	lc, err := object.GetCommit(st, tip)
	if err != nil {
		return fmt.Errorf("read commit %s: %w", tip, err)
	}
	hc, err := object.GetCommit(st, head)
	if err != nil {
		return fmt.Errorf("read the published commit %s: %w", head, err)
	}
	if hc.TreeHash != lc.TreeHash {
		return fmt.Errorf("the published commit %s has tree %s, the local tip %s has %s", head, hc.TreeHash, tip, lc.TreeHash)
	}
	if _, err := s.branchTip(st); err != nil {
		return err
	}
	return s.setTip(st, head)
}
