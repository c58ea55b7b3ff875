package dispatch

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
)

// worktrees adapts kernel/worktree (shared mirrors, session worktrees, the
// artifact branch) to the Git port.
type worktrees struct {
	M *worktree.Manager
	// Branch names the artifact branch for links (the manager's).
	Branch string
	// OnSessionBranch keeps the log under .agent/sessions/<id>/ on the
	// session branch instead of on the artifact branch.
	OnSessionBranch bool
	// Prefix starts session branches (the Dispatcher's BranchPrefix):
	// with OnSessionBranch, the log of a session is read from, and
	// written to, Prefix+<session id> when no worktree is open; the
	// remote's session branches of an issue are those under it.
	Prefix string
}

func (w worktrees) prefix() string {
	if w.Prefix == "" {
		return defaultBranchPrefix
	}
	return w.Prefix
}

func wtRepo(r github.Repo) worktree.Repo { return worktree.Repo{Owner: r.Owner, Name: r.Name} }

// numberAndID splits a session branch <prefix><number>-<id> into the
// number the worktree manager names it by and the session id. Any prefix
// is taken: a session keeps the branch its link records.
func numberAndID(branch string) (int, string, error) {
	_, sid, ok := worktree.SessionIDInBranch(branch)
	if !ok || !event.ValidSessionID(sid) {
		return 0, "", fmt.Errorf("%q is not a session branch", branch)
	}
	var n int
	if _, err := fmt.Sscanf(sid, "%d-", &n); err != nil || n <= 0 {
		return 0, "", fmt.Errorf("session branch %q does not start with an issue number", branch)
	}
	return n, sid, nil
}

// Start implements Git.
func (w worktrees) Start(ctx context.Context, repo github.Repo, branch string, base Base) (Worktree, error) {
	n, sid, err := numberAndID(branch)
	if err != nil {
		return nil, err
	}
	s, err := w.M.Prepare(ctx, worktree.PrepareOptions{Repo: wtRepo(repo), SessionID: sid, Number: n, Branch: branch, Base: worktree.Base{Branch: base.Ref, PullRequest: base.PullNumber}})
	if err != nil {
		return nil, err
	}
	if s.Branch != branch {
		s.Close()
		return nil, fmt.Errorf("worktree named the branch %q, want %q", s.Branch, branch)
	}
	if base.SHA != "" && s.BaseSHA != base.SHA && !s.Resumed {
		s.Close()
		return nil, fmt.Errorf("the base moved: expected %s, found %s; ask again", short(base.SHA), short(s.BaseSHA))
	}
	return &sessionTree{s: s, tip: s.BaseSHA}, nil
}

// Reopen implements Git.
func (w worktrees) Reopen(ctx context.Context, repo github.Repo, branch, head string) (Worktree, error) {
	n, sid, err := numberAndID(branch)
	if err != nil {
		return nil, err
	}
	s, err := w.M.Prepare(ctx, worktree.PrepareOptions{Repo: wtRepo(repo), SessionID: sid, Number: n, Branch: branch})
	if err != nil {
		return nil, err
	}
	if !s.Resumed {
		s.Close()
		return nil, fmt.Errorf("session branch %s is gone from %s: %w", branch, repo.FullName(), errBranchGone)
	}
	t := &sessionTree{s: s, tip: s.BaseSHA}
	if head != "" && head != s.BaseSHA {
		// HEAD goes back to the commit the pending approvals were computed
		// against; the working tree keeps the checkpoint's content.
		if err := s.SetHead(ctx, head); err != nil {
			s.Close()
			return nil, err
		}
	}
	return t, nil
}

// CommitArtifact implements Git.
func (w worktrees) CommitArtifact(ctx context.Context, repo github.Repo, sessionID string, wt Worktree, events, snapshot []byte) (string, error) {
	a := worktree.Artifact{Repo: wtRepo(repo), SessionID: sessionID, Events: events, Snapshot: snapshot}
	if !w.OnSessionBranch {
		return w.M.CommitArtifact(ctx, a)
	}
	t, ok := wt.(*sessionTree)
	if !ok || t == nil {
		// No worktree open (a cancellation): open the branch for the commit.
		opened, err := w.Reopen(ctx, repo, w.prefix()+sessionID, "")
		if err != nil {
			return "", err
		}
		defer opened.Close()
		t = opened.(*sessionTree)
	}
	sha, err := t.s.CommitArtifact(ctx, a)
	if err != nil {
		return "", err
	}
	t.tip = sha // the session branch moved: later commits go on top
	return sha, nil
}

// LoadArtifact implements Git.
func (w worktrees) LoadArtifact(ctx context.Context, repo github.Repo, sessionID string) ([]byte, error) {
	if !w.OnSessionBranch {
		return w.M.LoadArtifact(ctx, wtRepo(repo), sessionID)
	}
	t, err := w.Reopen(ctx, repo, w.prefix()+sessionID, "")
	if err != nil {
		return nil, err
	}
	defer t.Close()
	return t.(*sessionTree).s.LoadArtifact()
}

// ArtifactBranch implements Git.
func (w worktrees) ArtifactBranch() string {
	if w.OnSessionBranch {
		return ""
	}
	if w.Branch == "" {
		return worktree.DefaultArtifactBranch
	}
	return w.Branch
}

// sessionTree is a worktree.Session as a Worktree. tip is the session
// branch's tip on the remote as far as this process knows.
type sessionTree struct {
	s   *worktree.Session
	tip string
}

func (t *sessionTree) Dir() string { return t.s.Dir }

func (t *sessionTree) Commit(ctx context.Context, message, runID string, changes []replay.FileChange, allowEmpty bool) (string, bool, error) {
	head, err := t.s.Head()
	if err != nil {
		return "", false, err
	}
	if t.tip != "" && head != t.tip {
		// Commit on top of the branch tip (a checkpoint), not beside it.
		if err := t.s.SetHead(ctx, t.tip); err != nil {
			return "", false, err
		}
	}
	cs := make([]worktree.Change, len(changes))
	for i, c := range changes {
		cs[i] = worktree.Change{Path: c.Path, SHA256: c.SHA256}
	}
	sha, err := t.s.Commit(ctx, worktree.CommitOptions{Message: message, RunID: runID, Changes: cs, AllowEmpty: allowEmpty})
	if errors.Is(err, worktree.ErrNoChanges) {
		return t.tip, false, nil
	}
	if err != nil {
		return "", false, err
	}
	t.tip = sha
	return sha, true, nil
}

// Push publishes the branch and returns its tip on the remote: through the
// Git Data API that is GitHub's commit, which later commits build on.
func (t *sessionTree) Push(ctx context.Context) (string, error) {
	head, err := t.s.Publish(ctx)
	if err != nil {
		return "", err
	}
	t.tip = head
	return head, nil
}

// errBranchGone is returned by Reopen when the remote has no such session
// branch (it was deleted, or no attempt pushed it yet).
var errBranchGone = errors.New("the session branch is not on the remote")

// logSeq reads the Agent-Log-Seq line of the newest of the branch's last
// few commits that has one (the session branch may end with the log's own
// commit): the seq of the last event whose worktree changes that commit
// holds. false when none says.
func (t *sessionTree) logSeq() (int64, bool) {
	sha := t.tip
	for i := 0; i < 4 && sha != ""; i++ {
		msg, parent, err := t.s.CommitMessage(sha)
		if err != nil {
			return 0, false
		}
		if n, ok := parseLogSeq(msg); ok {
			return n, true
		}
		sha = parent
	}
	return 0, false
}

func (t *sessionTree) Close() error { return t.s.Close() }

// SessionBranches implements Git.
func (w worktrees) SessionBranches(ctx context.Context, repo github.Repo, number int) ([]string, error) {
	return w.M.RemoteBranches(ctx, wtRepo(repo), fmt.Sprintf("%s%d-", w.prefix(), number))
}

// gitData is the GitHub client as the worktree publisher's Git Data API:
// session branches published through it are GitHub's commits, signed and
// shown as Verified when the bot is an app installation.
type gitData struct {
	Client *github.Client
}

// CreateBlob implements worktree.GitDataAPI.
func (g gitData) CreateBlob(ctx context.Context, r worktree.Repo, content []byte) (string, error) {
	return g.Client.CreateBlob(ctx, r.Owner, r.Name, content)
}

// CreateTree implements worktree.GitDataAPI.
func (g gitData) CreateTree(ctx context.Context, r worktree.Repo, base string, entries []worktree.TreeEntry) (string, error) {
	out := make([]github.TreeEntry, len(entries))
	for i, e := range entries {
		out[i] = github.TreeEntry{Path: e.Path, Mode: e.Mode, SHA: e.SHA, Content: e.Content, Delete: e.Delete}
	}
	return g.Client.CreateTree(ctx, r.Owner, r.Name, base, out)
}

// CreateCommit implements worktree.GitDataAPI.
func (g gitData) CreateCommit(ctx context.Context, r worktree.Repo, message, tree string, parents []string) (string, error) {
	c, err := g.Client.CreateGitCommit(ctx, r.Owner, r.Name, message, tree, parents)
	return c.SHA, err
}

// CreateRef implements worktree.GitDataAPI.
func (g gitData) CreateRef(ctx context.Context, r worktree.Repo, branch, sha string) error {
	err := g.Client.CreateRef(ctx, r.Owner, r.Name, "refs/heads/"+branch, sha)
	if refRefused(err, "already exists") {
		return fmt.Errorf("%w: %w", worktree.ErrRefExists, err)
	}
	return err
}

// CommitOnBranch implements worktree.BranchCommitAPI: one GraphQL call
// (createCommitOnBranch) makes the Verified commit and moves the branch,
// where the Git Data API takes a tree, a commit and a ref update. Changes
// over github.MaxCommitOnBranchBytes are left to the Git Data API
// (worktree.ErrCannotCommitOnBranch, no call); a branch that is not at
// head is worktree.ErrNotFastForward, which the publisher answers by
// looking at the branch again.
func (g gitData) CommitOnBranch(ctx context.Context, r worktree.Repo, branch, head, message string, changes []worktree.TreeEntry) (string, string, error) {
	fc := make([]github.FileChange, len(changes))
	for i, c := range changes {
		if !c.Delete && c.Mode != "100644" {
			return "", "", fmt.Errorf("%w: %s has mode %s", worktree.ErrCannotCommitOnBranch, c.Path, c.Mode)
		}
		fc[i] = github.FileChange{Path: c.Path, Content: c.Content, Delete: c.Delete}
	}
	if !github.CanCommitOnBranch(fc) {
		return "", "", fmt.Errorf("%w: over %d bytes", worktree.ErrCannotCommitOnBranch, github.MaxCommitOnBranchBytes)
	}
	cm, err := g.Client.CommitOnBranch(ctx, r.Owner, r.Name, branch, head, message, fc)
	if errors.Is(err, github.ErrStaleHead) {
		return "", "", fmt.Errorf("%w: %w", worktree.ErrNotFastForward, err)
	}
	return cm.SHA, cm.Tree, err
}

// UpdateRef implements worktree.GitDataAPI; it never forces.
func (g gitData) UpdateRef(ctx context.Context, r worktree.Repo, branch, sha string) error {
	err := g.Client.UpdateRef(ctx, r.Owner, r.Name, "refs/heads/"+branch, sha, false)
	if refRefused(err, "not a fast forward") {
		return fmt.Errorf("%w: %w", worktree.ErrNotFastForward, err)
	}
	return err
}

// refRefused reports GitHub's 422 answer to a ref write whose message
// says why.
func refRefused(err error, why string) bool {
	var e *github.APIError
	return errors.As(err, &e) && e.Status == 422 && strings.Contains(strings.ToLower(e.Message), why)
}
