package worktree

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// ErrBranchMoved says that the session branch's ref in the worktree's
// .git is not where this Session left it: something other than the
// session (a command the agent ran can write into .git) moved it. Nothing
// is committed on, or published from, a commit the session did not make.
var ErrBranchMoved = errors.New("worktree: the session branch was moved in the worktree by something other than agentos")

// branchTip returns the session branch's tip as this Session left it,
// after checking that the worktree's ref still names it. s.mu is held.
func (s *Session) branchTip(st storer.ReferenceStorer) (plumbing.Hash, error) {
	ref, err := st.Reference(plumbing.NewBranchReferenceName(s.Branch))
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if ref.Hash() != s.tip {
		return plumbing.ZeroHash, fmt.Errorf("%w: %s is at %s, the session left it at %s", ErrBranchMoved, s.Branch, ref.Hash(), s.tip)
	}
	return s.tip, nil
}

// setTip points the session branch at h, in the worktree and in memory.
// s.mu is held.
func (s *Session) setTip(st storer.ReferenceStorer, h plumbing.Hash) error {
	if err := st.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName(s.Branch), h)); err != nil {
		return err
	}
	s.tip = h
	return nil
}
