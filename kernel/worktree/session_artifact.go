package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// SessionArtifactDir is where the session-branch option keeps a session's
// artifact, relative to the worktree root.
func SessionArtifactDir(sessionID string) string { return ".agent/sessions/" + sessionID }

// CommitArtifact is the alternative to Manager.CommitArtifact that keeps
// the artifact next to the change: it commits events.jsonl and
// snapshot.json under .agent/sessions/<id>/ on the session branch and pushes
// the branch, returning the commit's SHA. Only those two files go into the
// commit; other uncommitted changes in the worktree stay uncommitted. The
// files are also written into the worktree and the index, so the worktree
// stays clean with respect to them. a.Repo and a.SessionID may be left
// empty; when set they must name this session.
func (s *Session) CommitArtifact(ctx context.Context, a Artifact) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return "", err
	}
	if (a.Repo != Repo{} && a.Repo != s.repo) || (a.SessionID != "" && a.SessionID != s.id) {
		return "", fmt.Errorf("%w: artifact of %s session %s committed in session %s of %s", ErrInvalid, a.Repo, a.SessionID, s.id, s.repo)
	}
	if strings.ContainsAny(a.RunID, "\n\r") {
		return "", fmt.Errorf("%w: run id %q", ErrInvalid, a.RunID)
	}
	when := a.Time
	if when.IsZero() {
		when = time.Now()
	}
	repo, st, err := s.m.openRepo(s.repo, s.Dir)
	if err != nil {
		return "", fmt.Errorf("worktree: artifact: %w", err)
	}
	defer st.Close()
	head, err := s.branchTip(st)
	if err != nil {
		return "", fmt.Errorf("worktree: artifact: %w", err)
	}
	files := []file{{EventsFile, a.Events}, {SnapshotFile, a.Snapshot}}
	msg := commitMessage("agentos: session "+s.id+" artifact", s.id, a.RunID)
	author, err := s.m.author(ctx, s.repo)
	if err != nil {
		return "", err
	}
	sig := object.Signature{Name: author.Name, Email: author.Email, When: when}
	sha, changed, err := buildCommit(repo.Storer, head, []string{".agent", "sessions", s.id}, files, msg, sig)
	if err != nil {
		return "", fmt.Errorf("worktree: artifact: %w", err)
	}
	if changed {
		// The files go into the worktree too, so that it shows them as
		// committed. The worktree is what commands left: a symlink there
		// must not take the write out of it (os.Root refuses), and the
		// index entries are set from the data, not read back through it.
		root, err := os.OpenRoot(s.Dir)
		if err != nil {
			return "", fmt.Errorf("worktree: artifact: %w", err)
		}
		defer root.Close()
		dir := SessionArtifactDir(s.id)
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return "", fmt.Errorf("worktree: artifact: %w", err)
		}
		entries, paths := map[string]treeFile{}, map[string]bool{}
		for _, f := range files {
			p := dir + "/" + f.name
			if err := root.WriteFile(p, f.data, 0o644); err != nil {
				return "", fmt.Errorf("worktree: artifact: %w", err)
			}
			entries[p] = treeFile{mode: filemode.Regular, hash: plumbing.ComputeHash(plumbing.BlobObject, f.data)}
			paths[p] = true
		}
		if err := s.setTip(st, sha); err != nil {
			return "", fmt.Errorf("worktree: artifact: %w", err)
		}
		s.updateIndex(st, entries, paths)
	}
	c, err := s.m.cred(ctx, s.repo)
	if err != nil {
		return "", err
	}
	onRemote, err := s.publish(ctx, c, sha)
	if err != nil {
		return "", err
	}
	return onRemote.String(), nil
}

// LoadArtifact returns the events.jsonl committed on the session branch by
// Session.CommitArtifact (ErrNotFound when there is none), as of the
// worktree's HEAD: a resumed session reads what the previous run pushed.
func (s *Session) LoadArtifact() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return nil, err
	}
	st := s.m.openStorage(s.repo, s.Dir)
	defer st.Close()
	head, err := s.branchTip(st)
	if err != nil {
		return nil, fmt.Errorf("worktree: artifact: %w", err)
	}
	commit, err := object.GetCommit(st, head)
	if err != nil {
		return nil, fmt.Errorf("worktree: artifact: %w", err)
	}
	return readFile(commit, SessionArtifactDir(s.id)+"/"+EventsFile)
}

// readFile returns the content of path in commit's tree.
func readFile(commit *object.Commit, path string) ([]byte, error) {
	f, err := commit.File(path)
	if errors.Is(err, object.ErrFileNotFound) || errors.Is(err, object.ErrDirectoryNotFound) {
		return nil, fmt.Errorf("%w: %s at %s", ErrNotFound, path, commit.Hash)
	}
	if err != nil {
		return nil, fmt.Errorf("worktree: read %s: %w", path, err)
	}
	rd, err := f.Reader()
	if err != nil {
		return nil, fmt.Errorf("worktree: read %s: %w", path, err)
	}
	defer rd.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, rd); err != nil {
		return nil, fmt.Errorf("worktree: read %s: %w", path, err)
	}
	return buf.Bytes(), nil
}
