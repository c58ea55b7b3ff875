package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/revlist"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// errStale reports that the remote branch is no longer at the tip a commit
// was built on.
var errStale = errors.New("remote branch moved")

// maxWalk bounds the commits walked back to one the remote has before the
// exact (slower) revlist walk takes over.
const maxWalk = 1000

// pushRequest is one branch update.
type pushRequest struct {
	url    string
	branch string
	new    plumbing.Hash
	// known are commits the remote is known to have besides its advertised
	// refs (e.g. the pull request head the session started from).
	known []plumbing.Hash
	// lease, when set, is the only remote value the update may replace
	// (zero: the branch must not exist); errStale otherwise. When unset the
	// update must be a fast-forward.
	lease *plumbing.Hash
}

// push sends req.new to the remote branch with exactly the objects the
// remote lacks, computed from tree diffs along the new commits.
// go-git's Remote.Push walks the whole history of every advertised ref,
// which costs seconds on a medium repository; this walks only new commits.
func push(ctx context.Context, s storer.EncodedObjectStorer, c cred, req pushRequest) error {
	op := "push " + req.branch
	ep, err := transport.NewEndpoint(req.url)
	if err != nil {
		return c.wrap(op, err)
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return c.wrap(op, err)
	}
	sess, err := cl.NewReceivePackSession(ep, c.auth())
	if err != nil {
		return c.wrap(op, err)
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil && !errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return c.wrap(op, err)
	}
	name := plumbing.NewBranchReferenceName(req.branch)
	old := plumbing.ZeroHash
	known := map[plumbing.Hash]bool{}
	for _, h := range req.known {
		known[h] = true
	}
	if ar != nil {
		if h, ok := ar.References[name.String()]; ok {
			old = h
		}
		for _, h := range ar.References {
			if _, err := s.EncodedObject(plumbing.CommitObject, h); err == nil {
				known[h] = true
			}
		}
	}
	if old == req.new {
		return nil
	}
	if req.lease != nil {
		if old != *req.lease {
			return errStale
		}
	} else if !old.IsZero() {
		ok, err := isAncestor(s, old, req.new)
		if err != nil {
			return c.wrap(op, err)
		}
		if !ok {
			return c.wrap(op, fmt.Errorf("%w: remote %s is at %s, not an ancestor of %s (non-fast-forward)", errStale, req.branch, old, req.new))
		}
	}
	hashes, err := newObjects(s, req.new, known)
	if err != nil {
		return c.wrap(op, err)
	}
	var caps *capability.List
	if ar != nil {
		caps = ar.Capabilities
	} else {
		caps = capability.NewList()
	}
	upd := packp.NewReferenceUpdateRequestFromCapabilities(caps)
	upd.Commands = []*packp.Command{{Name: name, Old: old, New: req.new}}

	rd, wr := io.Pipe()
	upd.Packfile = rd
	done := make(chan error, 1)
	go func() {
		// go-git's DeltaObject lookup ignores alternates, and the git CLI
		// does not write an object it finds through them (a file reverted
		// to an older version): hide it so that every object is read the
		// ordinary way. Deltas among the new objects are still computed.
		enc := packfile.NewEncoder(wr, plainObjects{s}, !caps.Supports(capability.OFSDelta))
		_, err := enc.Encode(hashes, 10)
		done <- wr.CloseWithError(err)
	}()
	rs, err := sess.ReceivePack(ctx, upd)
	if err != nil {
		_ = rd.CloseWithError(err)
		<-done
		return c.wrap(op, err)
	}
	if err := <-done; err != nil {
		return c.wrap(op, err)
	}
	if rs != nil {
		if err := rs.Error(); err != nil {
			return c.wrap(op, err)
		}
	}
	return nil
}

// isAncestor reports whether a is reachable from b (first parents and
// merges alike).
func isAncestor(s storer.EncodedObjectStorer, a, b plumbing.Hash) (bool, error) {
	if _, err := s.EncodedObject(plumbing.CommitObject, a); err != nil {
		return false, nil // a commit we never had cannot be our ancestor
	}
	cb, err := object.GetCommit(s, b)
	if err != nil {
		return false, err
	}
	ca, err := object.GetCommit(s, a)
	if err != nil {
		return false, err
	}
	return ca.IsAncestor(cb)
}

// newObjects lists the objects reachable from tip that the remote lacks,
// given commits it has. Along a linear run of new commits this diffs each
// tree against its parent's, touching only changed subtrees; merges and
// long runs fall back to go-git's exact revlist walk.
func newObjects(s storer.EncodedObjectStorer, tip plumbing.Hash, known map[plumbing.Hash]bool) ([]plumbing.Hash, error) {
	seen := map[plumbing.Hash]bool{}
	var out []plumbing.Hash
	add := func(h plumbing.Hash) bool {
		if seen[h] {
			return false
		}
		seen[h] = true
		out = append(out, h)
		return true
	}
	h := tip
	for n := 0; !known[h]; n++ {
		c, err := object.GetCommit(s, h)
		if err != nil {
			return nil, fmt.Errorf("read commit %s: %w", h, err)
		}
		if n >= maxWalk || len(c.ParentHashes) > 1 {
			return slowObjects(s, tip, known)
		}
		add(c.Hash)
		var parentTree *object.Tree
		if len(c.ParentHashes) == 1 {
			p, err := object.GetCommit(s, c.ParentHashes[0])
			if err != nil {
				return nil, fmt.Errorf("read commit %s: %w", c.ParentHashes[0], err)
			}
			if parentTree, err = p.Tree(); err != nil {
				return nil, err
			}
		}
		tree, err := c.Tree()
		if err != nil {
			return nil, err
		}
		if err := treeDiffObjects(s, tree, parentTree, add); err != nil {
			return nil, err
		}
		if len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return out, nil
}

// treeDiffObjects adds t and every object under it that is not at the same
// path in old.
func treeDiffObjects(s storer.EncodedObjectStorer, t, old *object.Tree, add func(plumbing.Hash) bool) error {
	if old != nil && old.Hash == t.Hash {
		return nil
	}
	if !add(t.Hash) {
		return nil
	}
	oldEntries := map[string]object.TreeEntry{}
	if old != nil {
		for _, e := range old.Entries {
			oldEntries[e.Name] = e
		}
	}
	for _, e := range t.Entries {
		if o, ok := oldEntries[e.Name]; ok && o.Hash == e.Hash {
			continue
		}
		switch e.Mode {
		case filemode.Submodule:
			// A gitlink names a commit in another repository.
		case filemode.Dir:
			sub, err := object.GetTree(s, e.Hash)
			if err != nil {
				return fmt.Errorf("read tree %s: %w", e.Hash, err)
			}
			var oldSub *object.Tree
			if o, ok := oldEntries[e.Name]; ok && o.Mode == filemode.Dir {
				if oldSub, err = object.GetTree(s, o.Hash); err != nil {
					return fmt.Errorf("read tree %s: %w", o.Hash, err)
				}
			}
			if err := treeDiffObjects(s, sub, oldSub, add); err != nil {
				return err
			}
		default:
			add(e.Hash)
		}
	}
	return nil
}

func slowObjects(s storer.EncodedObjectStorer, tip plumbing.Hash, known map[plumbing.Hash]bool) ([]plumbing.Hash, error) {
	ignore := make([]plumbing.Hash, 0, len(known))
	for h := range known {
		ignore = append(ignore, h)
	}
	return revlist.Objects(s, []plumbing.Hash{tip}, ignore)
}

// plainObjects hides storer.DeltaObjectStorer from the pack encoder.
type plainObjects struct {
	storer.EncodedObjectStorer
}
