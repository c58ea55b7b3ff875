package webhook

import (
	"fmt"
	"strings"

	"github.com/agentos/agentos/bot/queue"
	"github.com/google/go-github/v62/github"
)

// Kinds of Trigger.
const (
	KindComment       = "comment"        // issue_comment created (issue or PR conversation)
	KindReview        = "review"         // pull_request_review submitted or dismissed
	KindReviewComment = "review_comment" // pull_request_review_comment created (line comment)
	KindPRClosed      = "pr_closed"      // pull_request closed (merged or not)
	KindPRSynchronize = "pr_synchronize" // pull_request synchronize (head moved)
	KindInstallation  = "installation"   // installation or installation_repositories, any action
)

// Trigger is every handled event normalised to one shape, so the rest of the
// bot handles comments, reviews and line comments alike.
type Trigger struct {
	Kind       string
	DeliveryID string
	// Attempt counts the claims of the delivery, this one included: more
	// than 1 when an earlier attempt may have begun the work (its process
	// died, or it asked for a retry).
	Attempt int
	// FinalAttempt is set when no retry follows a failure of this
	// attempt (the processor gives up after it): a run that cannot start
	// now is told to the user, since nothing else will.
	FinalAttempt bool
	Event        string // X-GitHub-Event
	Action       string

	Repo           string // owner/name; empty for account-level installation events
	Owner, Name    string
	InstallationID int64  // the app installation the delivery is for (0: not an app's webhook)
	DefaultBranch  string // repository.default_branch, when the payload has it

	Number int  // issue or pull request number
	IsPR   bool // the issue is a pull request (or the event is about one)

	CommentID   int64
	InReplyTo   int64 // review_comment: the line comment this one answers
	ReviewID    int64
	ReviewState string // approved | changes_requested | commented | dismissed

	// Author is who did this: the comment's or review's user, otherwise the
	// sender. AuthorAssociation is GitHub's hint about them (empty when the
	// payload has none); it is not an authorization.
	Author            string
	AuthorType        string // User | Bot | Organization
	AuthorAssociation string
	Body              string

	// The pull request as the payload describes it (review, review_comment
	// and pull_request events carry it; an issue_comment on a pull request
	// does not: HeadRef is then empty).
	HeadSHA    string
	HeadRef    string // the head branch
	HeadRepo   string // owner/name of the PR head; differs from BaseRepo for forks, empty if the fork is gone
	BaseRepo   string
	BaseRef    string
	PRNodeID   string // the pull request's GraphQL node id
	PRURL      string // its html_url
	Draft      bool
	IssueState string // open | closed
	Merged     bool   // pr_closed: merged rather than closed

	// Repositories lists the repositories an installation event is about
	// (installation: created/deleted; installation_repositories: added or
	// removed), as owner/name.
	Repositories []string
}

// IsFork reports whether the pull request's head lives in another
// repository than its base (or in one that was deleted). It is false when
// the payload does not carry the head (issue_comment on a pull request):
// fetch the pull request to know.
func (t Trigger) IsFork() bool { return t.IsPR && t.HeadSHA != "" && t.HeadRepo != t.BaseRepo }

// normalize turns a parsed event into a Trigger; ok is false for events
// (and pull_request actions) it has no trigger kind for. Which actions the
// bot acts on is the route table's to say (Events, from bot/dispatch's
// routes.go). The error reports a payload that lacks what a trigger needs.
func normalize(d queue.Delivery, ev any) (t Trigger, ok bool, err error) {
	t = Trigger{DeliveryID: d.ID, Event: d.Event, Attempt: d.Attempts}
	switch e := ev.(type) {
	case *github.IssueCommentEvent:
		t.Action = e.GetAction()
		if e.Issue == nil || e.Comment == nil {
			return t, false, errMissing("issue or comment")
		}
		t.Kind = KindComment
		setRepo(&t, e.Repo, e.Installation)
		t.Number = e.Issue.GetNumber()
		t.IsPR = e.Issue.IsPullRequest()
		t.IssueState = e.Issue.GetState()
		t.CommentID = e.Comment.GetID()
		t.Body = e.Comment.GetBody()
		t.AuthorAssociation = e.Comment.GetAuthorAssociation()
		setAuthor(&t, e.Comment.User, e.Sender)
	case *github.PullRequestReviewEvent:
		t.Action = e.GetAction()
		if e.Review == nil || e.PullRequest == nil {
			return t, false, errMissing("review or pull_request")
		}
		t.Kind = KindReview
		setRepo(&t, e.Repo, e.Installation)
		setPR(&t, e.PullRequest)
		t.ReviewID = e.Review.GetID()
		t.ReviewState = strings.ToLower(e.Review.GetState())
		t.Body = e.Review.GetBody()
		if t.Action == "dismissed" {
			// The dismisser is the sender; the review's user wrote it.
			t.ReviewState = "dismissed"
			setAuthor(&t, nil, e.Sender)
		} else {
			t.AuthorAssociation = e.Review.GetAuthorAssociation()
			setAuthor(&t, e.Review.User, e.Sender)
		}
	case *github.PullRequestReviewCommentEvent:
		t.Action = e.GetAction()
		if e.Comment == nil || e.PullRequest == nil {
			return t, false, errMissing("comment or pull_request")
		}
		t.Kind = KindReviewComment
		setRepo(&t, e.Repo, e.Installation)
		setPR(&t, e.PullRequest)
		t.CommentID = e.Comment.GetID()
		t.InReplyTo = e.Comment.GetInReplyTo()
		t.ReviewID = e.Comment.GetPullRequestReviewID()
		t.Body = e.Comment.GetBody()
		t.AuthorAssociation = e.Comment.GetAuthorAssociation()
		setAuthor(&t, e.Comment.User, e.Sender)
	case *github.PullRequestEvent:
		t.Action = e.GetAction()
		switch t.Action {
		case "closed":
			t.Kind = KindPRClosed
		case "synchronize":
			t.Kind = KindPRSynchronize
		default:
			return t, false, nil
		}
		if e.PullRequest == nil {
			return t, false, errMissing("pull_request")
		}
		setRepo(&t, e.Repo, e.Installation)
		setPR(&t, e.PullRequest)
		t.Merged = e.PullRequest.GetMerged()
		setAuthor(&t, nil, e.Sender)
	case *github.InstallationEvent:
		t.Action = e.GetAction()
		t.Kind = KindInstallation
		setInstallation(&t, e.Installation)
		t.Repositories = repoNames(e.Repositories)
		setAuthor(&t, nil, e.Sender)
	case *github.InstallationRepositoriesEvent:
		t.Action = e.GetAction()
		t.Kind = KindInstallation
		setInstallation(&t, e.Installation)
		t.Repositories = append(repoNames(e.RepositoriesAdded), repoNames(e.RepositoriesRemoved)...)
		setAuthor(&t, nil, e.Sender)
	default:
		return t, false, nil
	}
	if t.Kind != KindInstallation && t.Repo == "" {
		return t, false, errMissing("repository")
	}
	return t, true, nil
}

func errMissing(what string) error { return fmt.Errorf("payload lacks %s", what) }

func setRepo(t *Trigger, r *github.Repository, inst *github.Installation) {
	t.Repo = r.GetFullName()
	t.Owner = r.GetOwner().GetLogin()
	t.Name = r.GetName()
	if t.Repo == "" && t.Owner != "" && t.Name != "" {
		t.Repo = t.Owner + "/" + t.Name
	}
	if t.Owner == "" || t.Name == "" {
		if o, n, ok := strings.Cut(t.Repo, "/"); ok {
			t.Owner, t.Name = o, n
		}
	}
	t.InstallationID = inst.GetID()
	t.DefaultBranch = r.GetDefaultBranch()
}

func setInstallation(t *Trigger, inst *github.Installation) {
	t.InstallationID = inst.GetID()
	t.Owner = inst.GetAccount().GetLogin()
}

func setPR(t *Trigger, pr *github.PullRequest) {
	t.IsPR = true
	t.Number = pr.GetNumber()
	t.IssueState = pr.GetState()
	t.HeadSHA = pr.GetHead().GetSHA()
	t.HeadRef = pr.GetHead().GetRef()
	t.HeadRepo = pr.GetHead().GetRepo().GetFullName()
	t.BaseRepo = pr.GetBase().GetRepo().GetFullName()
	t.BaseRef = pr.GetBase().GetRef()
	t.PRNodeID = pr.GetNodeID()
	t.PRURL = pr.GetHTMLURL()
	t.Draft = pr.GetDraft()
}

// setAuthor takes the author from u, or from the sender when u is absent.
func setAuthor(t *Trigger, u, sender *github.User) {
	if u == nil {
		u = sender
	}
	t.Author = u.GetLogin()
	t.AuthorType = u.GetType()
}

func repoNames(rs []*github.Repository) []string {
	var out []string
	for _, r := range rs {
		if n := r.GetFullName(); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Normalize decodes one event's payload (the X-GitHub-Event name and the
// JSON body) into a Trigger exactly as bot/worker's Processor does, for
// callers that get events another way (the GitHub Action reads
// GITHUB_EVENT_PATH). ok is false for events it has no trigger for
// (which actions of them the bot acts on is the route table's to say:
// dispatch.Events).
func Normalize(eventName, deliveryID string, body []byte) (Trigger, bool, error) {
	if eventName == "ping" || github.EventForType(eventName) == nil {
		return Trigger{Event: eventName, DeliveryID: deliveryID}, false, nil
	}
	ev, err := github.ParseWebHook(eventName, body)
	if err != nil {
		return Trigger{}, false, fmt.Errorf("decode %s: %w", eventName, err)
	}
	return normalize(queue.Delivery{ID: deliveryID, Event: eventName, Body: body}, ev)
}

// NormalizeDecoded is Normalize for a queued delivery whose body the
// caller has already decoded with go-github's ParseWebHook (bot/worker,
// which tells a body it cannot decode from one that lacks what a trigger
// needs): the trigger also carries the delivery's attempt.
func NormalizeDecoded(d queue.Delivery, ev any) (Trigger, bool, error) { return normalize(d, ev) }
