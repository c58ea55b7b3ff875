package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
)

// memGitHub is an in-memory GitHub that implements the dispatcher's
// consumer interfaces, in the style of Prow's fakegithub: maps of what
// GitHub holds, changed by the methods as GitHub changes them, for tests
// of the dispatcher's logic that need neither HTTP nor git. The strict
// OpenAPI-checked fake (bot/internal/fakegithub) serves the scenario and
// end-to-end tests.
type memGitHub struct {
	mu       sync.Mutex
	login    string // the account the client acts as
	branch   string // the default branch
	issues   map[int]github.Issue
	prs      map[int]github.PullRequest
	files    map[int][]github.PRFile
	comments map[int][]github.Comment
	reviews  map[int][]github.Review
	labels   []string
	nextID   int64
}

var _ dispatch.GitHub = (*memGitHub)(nil)

func newMemGitHub(login string) *memGitHub {
	return &memGitHub{login: login, branch: "main", issues: map[int]github.Issue{}, prs: map[int]github.PullRequest{}, files: map[int][]github.PRFile{},
		comments: map[int][]github.Comment{}, reviews: map[int][]github.Review{}}
}

func memNotFound(op string, n int) error {
	return &github.APIError{Op: op, Status: 404, Message: "Not Found", Kind: github.ErrNotFound, Err: fmt.Errorf("#%d: 404 Not Found", n)}
}

func memInvalid(op, msg string) error {
	return &github.APIError{Op: op, Status: 422, Message: msg, Kind: github.ErrValidation, Err: errors.New("422 " + msg)}
}

func (m *memGitHub) id() int64 { m.nextID++; return m.nextID }

func (m *memGitHub) CreateComment(_ context.Context, _ github.Repo, n int, body string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, is := m.issues[n]
	_, pr := m.prs[n]
	if !is && !pr {
		return 0, memNotFound("CreateComment", n)
	}
	if utf8.RuneCountInString(body) > github.MaxBodyChars {
		return 0, memInvalid("CreateComment", "body is too long")
	}
	c := github.Comment{ID: m.id(), User: m.login, Body: body}
	m.comments[n] = append(m.comments[n], c)
	return c.ID, nil
}

func (m *memGitHub) EditComment(_ context.Context, _ github.Repo, id int64, body string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, cs := range m.comments {
		for i, c := range cs {
			if c.ID == id {
				m.comments[n][i].Body = body
				return nil
			}
		}
	}
	return memNotFound("EditComment", int(id))
}

func (m *memGitHub) ListComments(_ context.Context, _ github.Repo, n int) ([]github.Comment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.comments[n]), nil
}

func (m *memGitHub) DefaultBranch(context.Context, github.Repo) (string, error) { return m.branch, nil }

func (m *memGitHub) PullRequest(_ context.Context, _ github.Repo, n int) (github.PullRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pr, ok := m.prs[n]
	if !ok {
		return github.PullRequest{}, memNotFound("PullRequest", n)
	}
	return pr, nil
}

func (m *memGitHub) PullRequestByHead(_ context.Context, _ github.Repo, branch string) (github.PullRequest, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, pr := range m.prs {
		if pr.HeadRef == branch {
			return pr, true, nil
		}
	}
	return github.PullRequest{}, false, nil
}

func (m *memGitHub) CreateDraftPR(_ context.Context, repo github.Repo, p github.NewPR) (github.PullRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.Title == "" || p.Head == "" || p.Base == "" {
		return github.PullRequest{}, memInvalid("CreateDraftPR", "title, head and base are required")
	}
	n := 100 + len(m.prs)
	pr := github.PullRequest{Number: n, NodeID: fmt.Sprintf("PR_%d", n), HeadRef: p.Head, BaseRef: p.Base, HeadRepo: repo.FullName(), State: "open", Draft: true}
	m.prs[n] = pr
	return pr, nil
}

func (m *memGitHub) EditPRBody(_ context.Context, _ github.Repo, n int, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.prs[n]; !ok {
		return memNotFound("EditPRBody", n)
	}
	return nil
}

func (m *memGitHub) MarkReady(_ context.Context, _ github.Repo, pr github.PullRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.prs[pr.Number]
	if !ok {
		return memNotFound("MarkReady", pr.Number)
	}
	cur.Draft = false
	m.prs[pr.Number] = cur
	return nil
}

func (m *memGitHub) CreateReview(_ context.Context, _ github.Repo, n int, sha, body string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.prs[n]; !ok {
		return 0, memNotFound("CreateReview", n)
	}
	r := github.Review{ID: m.id(), User: m.login, Body: body, State: "COMMENTED", CommitID: sha}
	m.reviews[n] = append(m.reviews[n], r)
	return r.ID, nil
}

func (m *memGitHub) ReviewCommit(_ context.Context, _ github.Repo, n int, author, marker string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.reviews[n]
	for i := len(rs) - 1; i >= 0; i-- {
		if strings.EqualFold(rs[i].User, author) && strings.Contains(rs[i].Body, marker) {
			return rs[i].CommitID, nil
		}
	}
	return "", nil
}

func (m *memGitHub) HasReview(_ context.Context, _ github.Repo, n int, author string, parts ...string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.reviews[n] {
		if author != "" && !strings.EqualFold(author, r.User) {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(r.Body, p)
		}
		if all {
			return true, nil
		}
	}
	return false, nil
}

func (m *memGitHub) ListPRFiles(_ context.Context, _ github.Repo, n int) ([]github.PRFile, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.files[n]), nil
}

func (m *memGitHub) CreateReviewWithComments(_ context.Context, _ github.Repo, n int, r github.NewReview) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.prs[n]; !ok {
		return 0, memNotFound("CreateReviewWithComments", n)
	}
	rv := github.Review{ID: m.id(), User: m.login, Body: r.Body, State: "COMMENTED", CommitID: r.CommitID}
	m.reviews[n] = append(m.reviews[n], rv)
	return rv.ID, nil
}

func (m *memGitHub) Issue(_ context.Context, _ github.Repo, n int) (github.Issue, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	is, ok := m.issues[n]
	if !ok {
		return github.Issue{}, memNotFound("Issue", n)
	}
	return is, nil
}

func (m *memGitHub) RepoLabels(context.Context, github.Repo) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.labels), nil
}

func (m *memGitHub) AddLabels(_ context.Context, _ github.Repo, n int, labels []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	is, ok := m.issues[n]
	if !ok {
		return memNotFound("AddLabels", n)
	}
	is.Labels = append(is.Labels, labels...)
	m.issues[n] = is
	return nil
}

// writers is an Authorizer that allows the logins it lists, for every
// action, and refuses everyone else for lacking write access.
type writers map[string]bool

func (w writers) Authorize(_ context.Context, r auth.Request) auth.Decision {
	if w[strings.ToLower(r.Login)] {
		return auth.Decision{Allowed: true}
	}
	return auth.Decision{Reason: auth.ReasonPermission, Permission: "read", Request: r}
}

// installs records what the dispatcher tells Installations.
type installs struct {
	mu     sync.Mutex
	byRepo map[string]int64
}

func (i *installs) RememberInstallation(owner, repo string, id int64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.byRepo[owner+"/"+repo] = id
}

func (i *installs) ForgetInstallation(id int64) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for k, v := range i.byRepo {
		if v == id {
			delete(i.byRepo, k)
		}
	}
}
