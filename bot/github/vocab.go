package github

// The bot's GitHub vocabulary: the few facts of a repository, pull
// request, comment and issue that the rest of the bot works with, decoded
// once from go-github's types here so that no consumer translates them.

import (
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// Repo names a repository.
type Repo struct {
	Owner, Name string
}

// FullName is owner/name.
func (r Repo) FullName() string { return r.Owner + "/" + r.Name }

// ParseRepo splits "owner/name"; false when full is not exactly two
// non-empty parts.
func ParseRepo(full string) (Repo, bool) {
	owner, name, ok := strings.Cut(full, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return Repo{}, false
	}
	return Repo{Owner: owner, Name: name}, true
}

// PullRequest is what the bot knows of a pull request.
type PullRequest struct {
	Number   int
	NodeID   string // for GraphQL mutations (ready for review)
	URL      string // the web page
	HeadRef  string
	HeadSHA  string
	HeadRepo string // owner/name of the head repository (a fork differs from the base)
	BaseRef  string
	State    string // open | closed
	Draft    bool
}

func pullRequestFrom(p *gh.PullRequest) PullRequest {
	return PullRequest{
		Number: p.GetNumber(), NodeID: p.GetNodeID(), URL: p.GetHTMLURL(),
		HeadRef: p.GetHead().GetRef(), HeadSHA: p.GetHead().GetSHA(), HeadRepo: p.GetHead().GetRepo().GetFullName(),
		BaseRef: p.GetBase().GetRef(), State: p.GetState(), Draft: p.GetDraft(),
	}
}

// Comment is an issue or pull request conversation comment.
type Comment struct {
	ID   int64
	User string // the author's login
	Body string
}

// Issue is what the bot reads of an issue.
type Issue struct {
	Title, Body string
	Labels      []string
	State       string // open | closed
}

func issueFrom(is *gh.Issue) Issue {
	out := Issue{Title: is.GetTitle(), Body: is.GetBody(), State: is.GetState()}
	for _, l := range is.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out
}
