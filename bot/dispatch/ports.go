package dispatch

import (
	"context"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/runtime/replay"
)

// The GitHub API the dispatcher uses, in the small interfaces of its
// consumers. *github.Client satisfies each of them as it is; tests use
// an in-memory fake.

// Comments posts and edits the conversation comments of issues and pull
// requests: replies, and a session's tracking comment.
type Comments interface {
	CreateComment(ctx context.Context, repo github.Repo, number int, body string) (int64, error)
	EditComment(ctx context.Context, repo github.Repo, commentID int64, body string) error
	// ListComments lists an issue's or pull request's comments (all pages).
	ListComments(ctx context.Context, repo github.Repo, number int) ([]github.Comment, error)
}

// PullRequests reads a repository and opens and updates a session's draft
// pull request.
type PullRequests interface {
	DefaultBranch(ctx context.Context, repo github.Repo) (string, error)
	PullRequest(ctx context.Context, repo github.Repo, number int) (github.PullRequest, error)
	// PullRequestByHead finds the pull request (open or closed) whose head
	// is the repository's branch; false when there is none. Recovery looks
	// before it creates one.
	PullRequestByHead(ctx context.Context, repo github.Repo, branch string) (github.PullRequest, bool, error)
	CreateDraftPR(ctx context.Context, repo github.Repo, pr github.NewPR) (github.PullRequest, error)
	EditPRBody(ctx context.Context, repo github.Repo, number int, body string) error
	MarkReady(ctx context.Context, repo github.Repo, pr github.PullRequest) error
}

// Reviews asks for approvals with pull request reviews and finds them
// again.
type Reviews interface {
	// CreateReview submits a review with event COMMENT (the bot cannot
	// approve, and must not) on the given head commit.
	CreateReview(ctx context.Context, repo github.Repo, number int, commitSHA, body string) (int64, error)
	// ReviewCommit is the commit of the latest review by author whose body
	// contains marker ("" when there is none): GitHub's own record of the
	// head an approval request was made on.
	ReviewCommit(ctx context.Context, repo github.Repo, number int, author, marker string) (string, error)
	// HasReview reports whether author has a review on pull request
	// number whose body contains every part (the session's review marker
	// and the approval ids of one request).
	HasReview(ctx context.Context, repo github.Repo, number int, author string, parts ...string) (bool, error)
}

// GitHub is all the dispatcher asks of GitHub: its own needs, and what
// it hands bot/review.
type GitHub interface {
	Comments
	PullRequests
	Reviews
	review.GitHub
}

// Authorizer decides whether a user may drive the bot on a repository
// (trigger a run, approve, deny, cancel). *auth.Authorizer satisfies it; it
// fails closed.
type Authorizer interface {
	Authorize(ctx context.Context, r auth.Request) auth.Decision
}

// Base says where a session's work starts.
type Base struct {
	// Ref is the branch to start from (the default branch for an issue, the
	// PR's head branch for a same-repository PR).
	Ref string
	// PullNumber, when set, fetches refs/pull/N/head from the base
	// repository instead of Ref (a PR from a fork: never fetch from or push
	// to the fork).
	PullNumber int
	// SHA is the commit expected at the base (optional check).
	SHA string
}

// Git prepares session worktrees and keeps the session artifact.
type Git interface {
	// Start prepares a new worktree for the session on a new branch created
	// at base.
	Start(ctx context.Context, repo github.Repo, branch string, base Base) (Worktree, error)
	// Reopen prepares the session branch as it is on the remote: the
	// working tree holds the branch tip's content and HEAD is at head,
	// which must be the tip or the tip's parent (the commit the pending
	// approvals were computed against, before the bot's checkpoint commit).
	Reopen(ctx context.Context, repo github.Repo, branch, head string) (Worktree, error)
	// CommitArtifact commits the session's events.jsonl and snapshot.json
	// — to the artifact branch, or under .agent/sessions/<id>/ on the
	// session branch (then through wt when it is open) — and returns the
	// commit.
	CommitArtifact(ctx context.Context, repo github.Repo, sessionID string, wt Worktree, events, snapshot []byte) (string, error)
	// LoadArtifact reads a session's events.jsonl back from where
	// CommitArtifact put it.
	LoadArtifact(ctx context.Context, repo github.Repo, sessionID string) ([]byte, error)
	// ArtifactBranch names the branch the log is committed to, for links:
	// the artifact branch, or "" when it goes on the session branch.
	ArtifactBranch() string
	// SessionBranches lists the remote's session branches of issue or
	// pull request number (agent/<number>-<id>), as the remote has them now.
	SessionBranches(ctx context.Context, repo github.Repo, number int) ([]string, error)
}

// Worktree is one session's checkout.
type Worktree interface {
	Dir() string
	// Commit commits the change set — the files the kernel's file tools
	// changed since the branch's last session commit, as the session's log
	// records them (replay.WorkspaceChanges) — as a child of the session branch's tip (whatever HEAD points at)
	// with the bot identity, the message and the Agent-Session and
	// Agent-Run trailers. Nothing else of the working tree is committed:
	// what commands wrote there is not. A file of the change set that no
	// longer holds what its tool wrote fails the commit
	// (*worktree.ChangedError). allowEmpty makes a commit even without
	// changes. It returns the new tip, or the old tip and false when there
	// was nothing to commit.
	Commit(ctx context.Context, message, runID string, changes []replay.FileChange, allowEmpty bool) (sha string, made bool, err error)
	// Push publishes the session branch to the base repository and
	// returns its tip there: the committed SHA when pushed over git,
	// GitHub's own commit (same tree and message) when published through
	// the Git Data API.
	Push(ctx context.Context) (string, error)
	Close() error
}
