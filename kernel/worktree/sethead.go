package worktree

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// SetHead points the session branch (and so HEAD) at sha without touching
// the working tree or the index, like `git reset --soft`. sha must be the
// branch tip or one of its ancestors.
//
// A session resumed after a pause uses it: the bot commits a checkpoint
// when a run pauses for approval, but the pending approvals were computed
// against the commit before it; HEAD goes back there while the files stay
// as the checkpoint has them, so the approval's revision matches again.
// The next commit first moves HEAD forward to the tip.
func (s *Session) SetHead(ctx context.Context, sha string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(); err != nil {
		return err
	}
	h := plumbing.NewHash(sha)
	if len(sha) != 40 || h.IsZero() || h.String() != sha {
		return fmt.Errorf("%w: commit %q", ErrInvalid, sha)
	}
	st := s.m.openStorage(s.repo, s.Dir)
	defer st.Close()
	cur, err := s.branchTip(st)
	if err != nil {
		return fmt.Errorf("worktree: set head: %w", err)
	}
	if cur == h {
		return nil
	}
	tip, err := object.GetCommit(st, cur)
	if err != nil {
		return fmt.Errorf("worktree: set head: %w", err)
	}
	target, err := object.GetCommit(st, h)
	if err != nil {
		return fmt.Errorf("%w: commit %s is not in the session's history", ErrInvalid, sha)
	}
	related, err := target.IsAncestor(tip)
	if err != nil {
		return fmt.Errorf("worktree: set head: %w", err)
	}
	if !related {
		// Moving forward again to a commit this session made is fine too.
		if related, err = tip.IsAncestor(target); err != nil || !related {
			return fmt.Errorf("%w: %s is neither an ancestor nor a descendant of the branch tip %s", ErrInvalid, sha, cur)
		}
	}
	if err := s.setTip(st, h); err != nil {
		return fmt.Errorf("worktree: set head: %w", err)
	}
	return nil
}
