package review_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/review"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
)

// fakeGitHub is an in-memory GitHub for the review and triage flows, in
// the style of Prow's fakegithub: maps of what GitHub holds, which the
// methods read and change as GitHub does (bodies over the limit and line
// comments outside the diff are refused with 422, an unknown number is
// 404, adding a label the repository lacks creates it), and which tests
// assert on. The strict OpenAPI-checked fake (bot/internal/fakegithub)
// serves the end-to-end tests over HTTP.
type fakeGitHub struct {
	mu       sync.Mutex
	login    string // the account the client acts as
	prs      map[int]github.PullRequest
	files    map[int][]github.PRFile
	issues   map[int]github.Issue
	labels   []string // the repository's
	comments map[int][]github.Comment
	reviews  map[int][]fakeReview
	nextID   int64
	// moved makes GitHub refuse every line comment, as when the head moved
	// after the files were read.
	moved bool
}

type fakeReview struct {
	ID   int64
	User string
	github.NewReview
}

var _ review.GitHub = (*fakeGitHub)(nil)

func newFakeGitHub(login string) *fakeGitHub {
	return &fakeGitHub{login: login, prs: map[int]github.PullRequest{}, files: map[int][]github.PRFile{}, issues: map[int]github.Issue{},
		comments: map[int][]github.Comment{}, reviews: map[int][]fakeReview{}}
}

func notFound(op string, n int) error {
	return &github.APIError{Op: op, Status: 404, Message: "Not Found", Kind: github.ErrNotFound, Err: fmt.Errorf("#%d: 404 Not Found", n)}
}

func unprocessable(op, msg string) error {
	return &github.APIError{Op: op, Status: 422, Message: msg, Kind: github.ErrValidation, Err: errors.New("422 " + msg)}
}

func (f *fakeGitHub) exists(n int) bool {
	_, pr := f.prs[n]
	_, is := f.issues[n]
	return pr || is
}

func (f *fakeGitHub) CreateComment(_ context.Context, _ github.Repo, n int, body string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists(n) {
		return 0, notFound("CreateComment", n)
	}
	if utf8.RuneCountInString(body) > github.MaxBodyChars {
		return 0, unprocessable("CreateComment", "body is too long")
	}
	f.nextID++
	f.comments[n] = append(f.comments[n], github.Comment{ID: f.nextID, User: f.login, Body: body})
	return f.nextID, nil
}

func (f *fakeGitHub) ListComments(_ context.Context, _ github.Repo, n int) ([]github.Comment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.exists(n) {
		return nil, notFound("ListComments", n)
	}
	return slices.Clone(f.comments[n]), nil
}

func (f *fakeGitHub) PullRequest(_ context.Context, _ github.Repo, n int) (github.PullRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pr, ok := f.prs[n]
	if !ok {
		return github.PullRequest{}, notFound("PullRequest", n)
	}
	return pr, nil
}

func (f *fakeGitHub) ListPRFiles(_ context.Context, _ github.Repo, n int) ([]github.PRFile, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.prs[n]; !ok {
		return nil, notFound("ListPRFiles", n)
	}
	return slices.Clone(f.files[n]), nil
}

func (f *fakeGitHub) CreateReviewWithComments(_ context.Context, _ github.Repo, n int, r github.NewReview) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.prs[n]; !ok {
		return 0, notFound("CreateReviewWithComments", n)
	}
	if utf8.RuneCountInString(r.Body) > github.MaxBodyChars {
		return 0, unprocessable("CreateReviewWithComments", "body is too long")
	}
	for _, c := range r.Comments {
		in := slices.ContainsFunc(f.files[n], func(p github.PRFile) bool { return p.Path == c.Path && p.Patch != "" })
		if f.moved || !in {
			return 0, unprocessable("CreateReviewWithComments", "Pull request review thread line must be part of the diff")
		}
	}
	f.nextID++
	f.reviews[n] = append(f.reviews[n], fakeReview{ID: f.nextID, User: f.login, NewReview: r})
	return f.nextID, nil
}

func (f *fakeGitHub) HasReview(_ context.Context, _ github.Repo, n int, author string, parts ...string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.reviews[n] {
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

func (f *fakeGitHub) Issue(_ context.Context, _ github.Repo, n int) (github.Issue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	is, ok := f.issues[n]
	if !ok {
		return github.Issue{}, notFound("Issue", n)
	}
	is.Labels = slices.Clone(is.Labels)
	return is, nil
}

func (f *fakeGitHub) RepoLabels(context.Context, github.Repo) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.labels), nil
}

func (f *fakeGitHub) AddLabels(_ context.Context, _ github.Repo, n int, labels []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	is, ok := f.issues[n]
	if !ok {
		return notFound("AddLabels", n)
	}
	for _, l := range labels {
		if !slices.Contains(f.labels, l) {
			f.labels = append(f.labels, l) // GitHub creates a label the repository lacks
		}
		if !slices.Contains(is.Labels, l) {
			is.Labels = append(is.Labels, l)
		}
	}
	f.issues[n] = is
	return nil
}

// fakeSessions is the session lifecycle as bot/dispatch serves it, in
// memory: session ids derive from the delivery, logs are event lists,
// annotations are artifact.emitted events as the dispatcher appends them.
type fakeSessions struct {
	mu     sync.Mutex
	logs   map[string][]event.Event
	leased map[string]bool
	// mayRun answers MayRun; branches are the session branches
	// IsSessionBranch knows.
	mayRun   bool
	branches map[string]bool
	started  []startedRun
	kept     []string // sessions whose log KeepLog committed
}

type startedRun struct {
	t      webhook.Trigger
	prompt string
}

var _ review.Sessions = (*fakeSessions)(nil)

func newFakeSessions() *fakeSessions {
	return &fakeSessions{logs: map[string][]event.Event{}, leased: map[string]bool{}, branches: map[string]bool{}, mayRun: true}
}

func (s *fakeSessions) SessionID(t webhook.Trigger) string {
	return fmt.Sprintf("%d-%s", t.Number, t.DeliveryID)
}

func (s *fakeSessions) Lease(_ context.Context, sid string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leased[sid] {
		return nil, fmt.Errorf("session %s is leased", sid)
	}
	s.leased[sid] = true
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.leased, sid)
	}, nil
}

func (s *fakeSessions) MayRun(context.Context, github.Repo, webhook.Trigger) (bool, error) {
	return s.mayRun, nil
}

func (s *fakeSessions) Events(_ context.Context, sid string) ([]event.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.logs[sid]), nil
}

// begin writes the start of a cycle's log, as the workflow plane's
// executor does under the review's session.
func (s *fakeSessions) begin(sid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs[sid] = append(s.logs[sid], event.Event{SessionID: sid, Seq: int64(len(s.logs[sid]) + 1), Type: event.SessionStart, Payload: json.RawMessage(`{}`)})
}

func (s *fakeSessions) Annotate(_ context.Context, sid, kind string, v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.logs[sid]) == 0 {
		return fmt.Errorf("annotate: session %s has no events", sid)
	}
	content, err := json.Marshal(v)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(map[string]any{"kind": kind, "name": "github", "content": string(content)})
	if err != nil {
		return err
	}
	s.logs[sid] = append(s.logs[sid], event.Event{SessionID: sid, Seq: int64(len(s.logs[sid]) + 1), Type: event.ArtifactEmitted, Payload: payload})
	return nil
}

// records returns the content of every kind annotation in sid's log.
func (s *fakeSessions) records(sid, kind string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.logs[sid] {
		if e.Type == event.ArtifactEmitted && event.FieldString(e.Payload, "kind") == kind {
			out = append(out, event.FieldString(e.Payload, "content"))
		}
	}
	return out
}

func (s *fakeSessions) KeepLog(_ context.Context, repo github.Repo, sid string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept = append(s.kept, sid)
	return "https://github.com/" + repo.FullName() + "/blob/log/" + sid + "/events.jsonl", nil
}

func (s *fakeSessions) IsSessionBranch(_ context.Context, _ github.Repo, branch string) (bool, error) {
	return s.branches[branch], nil
}

func (s *fakeSessions) StartRun(_ context.Context, _ github.Repo, t webhook.Trigger, prompt string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, startedRun{t: t, prompt: prompt})
	return s.SessionID(t), nil
}
