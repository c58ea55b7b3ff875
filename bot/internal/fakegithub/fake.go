// Package fakegithub is a stateful, in-memory fake of the GitHub REST API
// (plus the one GraphQL mutation the bot uses), git over HTTP and GitHub's
// webhooks, for tests and the demo. Clients talk to it over real HTTP
// (Serve, or Start for a loopback server); tests seed and inspect its state
// through Go methods.
//
// The fake cannot drift from GitHub: every route it serves is keyed by an
// operation of GitHub's published OpenAPI description (@octokit/openapi),
// every request is matched to a spec operation and its JSON body validated
// against that operation's request schema, and every answer of the fake is
// validated against the operation's responses (see responses.go). A request
// to a route the spec does not have, or that the fake does not implement,
// is answered 404; a body the spec rejects is answered 422; these and any
// answer outside the description are recorded and reported by Violations
// and CheckNoViolations.
//
// GraphQL (POST /graphql, /api/graphql on Enterprise Server) is not part of
// the REST OpenAPI description, so it is exempt from the spec check; the
// fake supports only the viewer query and the markPullRequestReadyForReview
// and createCommitOnBranch mutations.
//
// Behaviour copied from real GitHub (see
// docs/github.md): authentication per endpoint, for every route (auth.go:
// an app's JWT only on the /app endpoints, user or installation tokens
// elsewhere, 401 otherwise); installation tokens scoped to their
// installation's repositories and expiring after an hour; an installation
// token cannot call GET /user (403); nobody approves or requests changes
// on their own pull request (422); a pull request needs a commit between
// base and head (422 "No commits between ..."); comment, review and PR
// bodies over 65,536 characters are rejected (422); REST PATCH /pulls/{n}
// does not accept "draft"; responses carry rate-limit headers. Calls are
// counted per endpoint (calls.go). FailNext injects failures (403 +
// Retry-After, 429, 5xx) for client tests. On a git-backed repository
// (BackWithGit) the Git Data API writes real objects and ref updates must
// fast-forward unless forced (gitdata.go); a pull request seeded with
// Files has a diff that review comments are checked against (prdiff.go).
// Not modelled elsewhere: commit graphs ("commits between" is head SHA !=
// base SHA; refs of repositories without git are not checked for
// fast-forward). Lists are paginated like
// GitHub's (per_page, page, Link header).
package fakegithub

import (
	"bytes"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/internal/corpus"
)

// MaxBodyChars is GitHub's limit on issue, PR, comment and review bodies.
const MaxBodyChars = 65536

// Permission levels of the collaborator permission API.
const (
	PermAdmin    = "admin"
	PermMaintain = "maintain"
	PermWrite    = "write"
	PermTriage   = "triage"
	PermRead     = "read"
	PermNone     = "none"
)

// Repo seeds a repository.
type Repo struct {
	Owner, Name   string
	DefaultBranch string // "main" if empty
	Private       bool
	Parent        string // "owner/name" of the fork parent, "" if not a fork
	// NoIssues turns the repository's issues off: opening one is 410.
	NoIssues bool
}

// User is an account known to the fake.
type User struct {
	ID    int64
	Login string
	Type  string // "User", "Bot" or "Organization"
	Name  string // display name ("" for none)
}

// Issue is an issue or pull request's issue half.
type Issue struct {
	Number int
	Title  string
	Body   string
	User   string
	State  string // open, closed
	IsPR   bool
	// Labels are the names of the issue's labels.
	Labels []string
	// Created and Updated default to the fake's clock at creation.
	Created, Updated time.Time
}

// PullRequest is a pull request's state. HeadSHA and BaseSHA are the SHAs
// the refs had when last read.
type PullRequest struct {
	Number int
	NodeID string
	Title  string
	Body   string
	User   string
	State  string
	Draft  bool
	Merged bool
	Head   string // branch name
	Base   string // branch name
	// HeadRepo is "owner/name" of the fork the head lives in; "" for a
	// head in the base repository. A fork's HeadSHA is taken as seeded.
	HeadRepo string
	HeadSHA  string
	BaseSHA  string
	// DiffLines, when set, are the lines of each path that are part of the
	// PR's diff; a review comment elsewhere is refused (422), as on GitHub.
	// When nil, comment positions are not checked.
	DiffLines map[string][]int
	// Files, when set, are the PR's diff (see PRFile): review comments
	// must point into their hunks, on the side (LEFT/RIGHT) they name, and
	// a multi-line comment must start in the same hunk; GET
	// .../pulls/{n}/files lists them and GET .../pulls/{n} with the diff
	// media type answers them as one unified diff. Files take precedence
	// over DiffLines.
	Files []PRFile
	// Created and Updated default to the fake's clock at creation.
	Created, Updated time.Time
}

// Comment is an issue (or PR conversation) comment.
type Comment struct {
	ID        int64
	Issue     int
	Body      string
	User      string
	Reactions []string // reaction contents, in order
	Created   time.Time
	Updated   time.Time
}

// Review is a pull request review.
type Review struct {
	ID       int64
	PR       int
	User     string
	Body     string
	State    string // APPROVED, CHANGES_REQUESTED, COMMENTED, PENDING, DISMISSED
	CommitID string
	Comments []int64 // review comment ids
	// Submitted is when it was submitted (not for PENDING).
	Submitted time.Time
}

// ReviewComment is a line comment on a pull request's diff.
type ReviewComment struct {
	ID       int64
	PR       int
	ReviewID int64
	User     string
	Body     string
	Path     string
	Line     int
	Side     string
	// StartLine and StartSide are the first line of a multi-line comment
	// (0 and "" for a single line).
	StartLine int
	StartSide string
	CommitID  string
	Created   time.Time
}

// App is a GitHub App the fake accepts JWTs for.
type App struct {
	ID        int64
	Slug      string
	PublicKey *rsa.PublicKey
	// OwnerLogin owns the app ("" makes it owned by its own bot account).
	OwnerLogin string
}

// Owner is the login of the app's owner.
func (a *App) Owner() string {
	if a.OwnerLogin != "" {
		return a.OwnerLogin
	}
	return a.Slug + "[bot]"
}

// BotLogin is the account the app acts as: "<slug>[bot]".
func (a *App) BotLogin() string { return a.Slug + "[bot]" }

// Violation is a request the spec does not allow (or the fake does not
// implement); a test fails on it.
type Violation struct {
	Method, Path string
	Status       int
	Reason       string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s → %d: %s", v.Method, v.Path, v.Status, v.Reason)
}

// Request is one request the fake received.
type Request struct {
	Method string
	Path   string // concrete path, without the /api/v3 prefix
	Op     string // spec path template, "" if none matched; "graphql" for GraphQL
	Status int
	// Actor is who the request authenticated as: a user's login, an
	// installation's "<slug>[bot]", "app:<id>" for an app's JWT; "" when
	// it did not authenticate.
	Actor string
}

// Failure is an injected response: see FailNext.
type Failure struct {
	Status     int
	RetryAfter string // Retry-After header value, "" for none
	// RateLimited answers with X-RateLimit-Remaining: 0 and a reset time
	// ResetIn from now (a primary rate limit).
	RateLimited bool
	ResetIn     time.Duration
	Message     string
}

type repoState struct {
	Repo
	id             int64
	refs           map[string]string // "refs/heads/main" → sha
	issues         map[int]*Issue
	prs            map[int]*PullRequest
	nextNumber     int
	perms          map[string]string // lower(login) → level
	installationID int64
	labels         map[string]*Label // lower(name) → label
}

// Fake is the fake GitHub server. It is an http.Handler; it is safe for
// concurrent use.
type Fake struct {
	spec   *Spec
	routes map[string]route // routeTable, built by NewWithSpec
	now    func() time.Time
	// api and web are the roots the fake's bodies link to.
	api, web string

	mu             sync.Mutex
	repos          map[string]*repoState // lower("owner/name")
	users          map[string]*User      // lower(login)
	tokens         map[string]*identity
	apps           map[int64]*App
	installs       map[int64]int64 // installation id → app id
	comments       map[int64]*Comment
	commentRepo    map[int64]string
	reviews        map[string][]*Review // repo key → reviews
	reviewComments map[string][]*ReviewComment
	nextID         int64
	failures       []Failure
	violations     []Violation
	requests       []Request
	calls          map[string]int // callKey → count, since the last ResetCalls
	callsFrom      int            // index in requests of the first request counted
	hooks          hooks
	rateRemaining  map[string]int
	gitDirs        map[string]string // lower("owner/name") → bare repository backing its refs
	oauthClients   map[string]*OAuthClient
	oauthCodes     map[string]*oauthCode
	browserUser    string                 // who is signed in to the web pages (SignInBrowser)
	signed         map[string]bool        // commit sha → created through the Git Data API and signed by GitHub
	devices        map[string]*deviceAuth // device_code → the device flow's state
	actionsNoPRs   map[string]bool        // lower(owner/name) → GitHub Actions may not open pull requests (actionsettings.go)
}

// TB is the part of testing.TB the fake needs; *testing.T satisfies it.
// The fake does not import testing, so that agentos demo --github can run
// it inside the binary.
type TB interface {
	corpus.TB
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
}

// New returns an empty fake validated against GitHub's OpenAPI description
// from the npm corpus (see corpus.OpenAPI: skipped loudly on a developer
// machine without it, fatal under CI=true).
func New(tb TB) *Fake {
	tb.Helper()
	spec, err := LoadSpec(corpus.OpenAPI(tb))
	if err != nil {
		tb.Fatalf("fakegithub: %v", err)
	}
	return NewWithSpec(spec)
}

// NewWithSpec returns an empty fake using an already loaded spec.
func NewWithSpec(spec *Spec) *Fake {
	return &Fake{
		spec:           spec,
		routes:         routeTable(),
		now:            time.Now,
		api:            "https://api.github.com",
		web:            "https://github.com",
		repos:          map[string]*repoState{},
		users:          map[string]*User{},
		tokens:         map[string]*identity{},
		apps:           map[int64]*App{},
		installs:       map[int64]int64{},
		comments:       map[int64]*Comment{},
		commentRepo:    map[int64]string{},
		reviews:        map[string][]*Review{},
		reviewComments: map[string][]*ReviewComment{},
		nextID:         1000,
		rateRemaining:  map[string]int{},
		calls:          map[string]int{},
	}
}

// Serve starts an httptest server for the fake, closed when the test ends,
// and returns its URL.
func (f *Fake) Serve(tb TB) string {
	tb.Helper()
	srv := httptest.NewServer(f)
	tb.Cleanup(srv.Close)
	tb.Cleanup(f.Close)
	f.SetURL(srv.URL)
	return srv.URL
}

// SetURL says where the fake is served (scheme://host:port): the URLs in
// its bodies (url, html_url, clone_url…) point there. Serve and Start set
// it.
func (f *Fake) SetURL(base string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.api, f.web = strings.TrimRight(base, "/"), strings.TrimRight(base, "/")
}

// SetClock replaces the fake's clock (rate-limit reset times, token
// expiry, timestamps), so a client under test can share it.
func (f *Fake) SetClock(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// Spec returns the OpenAPI description the fake validates against.
func (f *Fake) Spec() *Spec { return f.spec }

func key(owner, name string) string { return strings.ToLower(owner + "/" + name) }

func (f *Fake) id() int64 { f.nextID++; return f.nextID }

// AddRepo seeds a repository with its default branch ref at a fixed SHA.
func (f *Fake) AddRepo(r Repo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.DefaultBranch == "" {
		r.DefaultBranch = "main"
	}
	f.repos[key(r.Owner, r.Name)] = &repoState{
		Repo: r, id: f.id(),
		refs:   map[string]string{"refs/heads/" + r.DefaultBranch: sha("base-" + r.Owner + "/" + r.Name)},
		issues: map[int]*Issue{}, prs: map[int]*PullRequest{}, nextNumber: 1,
		perms: map[string]string{}, labels: map[string]*Label{},
	}
	f.ensureUser(r.Owner, "User")
}

// AddUser seeds an account (type "User" or "Bot").
func (f *Fake) AddUser(login, typ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ensureUser(login, typ)
}

func (f *Fake) ensureUser(login, typ string) *User {
	if u, ok := f.users[strings.ToLower(login)]; ok {
		return u
	}
	if typ == "" {
		typ = "User"
	}
	u := &User{ID: f.id(), Login: login, Type: typ}
	f.users[strings.ToLower(login)] = u
	return u
}

// AddToken makes token authenticate as login (a personal access token or
// the Actions GITHUB_TOKEN's identity).
func (f *Fake) AddToken(token, login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	f.tokens[token] = &identity{user: f.ensureUser(login, typ)}
}

// AddInstallationToken makes token an installation access token of
// installationID (see AddInstallation) that expires an hour from the
// fake's clock, as GitHub's do; the Actions GITHUB_TOKEN is one (of the
// github-actions app). Tokens minted through POST
// /app/installations/{id}/access_tokens are the same kind.
func (f *Fake) AddInstallationToken(token string, installationID int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[token] = &identity{installation: installationID, expires: f.now().Add(InstallationTokenLifetime)}
}

// AddApp registers a GitHub App whose JWTs (RS256, iss = app id) the fake
// accepts. Its bot account is "<slug>[bot]".
func (f *Fake) AddApp(a App) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.apps[a.ID] = &a
	f.ensureUser(a.BotLogin(), "Bot")
	f.ensureUser(a.Owner(), "")
}

// AddInstallation installs app appID on the given repositories.
func (f *Fake) AddInstallation(installationID, appID int64, repos ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installs[installationID] = appID
	for _, r := range repos {
		if rs, ok := f.repos[strings.ToLower(r)]; ok {
			rs.installationID = installationID
		}
	}
}

// SetPermission sets login's permission level on repo ("owner/name").
func (f *Fake) SetPermission(repo, login, level string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ensureUser(login, "")
	if rs, ok := f.repos[strings.ToLower(repo)]; ok {
		rs.perms[strings.ToLower(login)] = level
	}
}

// SetRef points ref ("refs/heads/x" or "heads/x") of repo at sha.
func (f *Fake) SetRef(repo, ref, sha string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rs, ok := f.repos[strings.ToLower(repo)]; ok {
		rs.refs[fullRef(ref)] = sha
	}
}

// Ref returns the SHA ref points at.
func (f *Fake) Ref(repo, ref string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs, ok := f.repos[strings.ToLower(repo)]
	if !ok {
		return "", false
	}
	s, ok := rs.refs[fullRef(ref)]
	return s, ok
}

// AddIssue seeds an issue and returns its number.
func (f *Fake) AddIssue(repo string, is Issue) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs, ok := f.repos[strings.ToLower(repo)]
	if !ok {
		return 0
	}
	is.Number = rs.nextNumber
	rs.nextNumber++
	if is.State == "" {
		is.State = "open"
	}
	if is.Created.IsZero() {
		is.Created = f.now()
	}
	if is.Updated.IsZero() {
		is.Updated = is.Created
	}
	f.ensureUser(is.User, "")
	rs.issues[is.Number] = &is
	return is.Number
}

// AddPullRequest seeds a pull request (head and base refs must exist) and
// returns its number.
func (f *Fake) AddPullRequest(repo string, pr PullRequest) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs, ok := f.repos[strings.ToLower(repo)]
	if !ok {
		return 0
	}
	return f.addPR(rs, pr).Number
}

func (f *Fake) addPR(rs *repoState, pr PullRequest) *PullRequest {
	pr.Number = rs.nextNumber
	rs.nextNumber++
	if pr.State == "" {
		pr.State = "open"
	}
	pr.NodeID = fmt.Sprintf("PR_fake%d_%d", rs.id, pr.Number)
	if pr.Created.IsZero() {
		pr.Created = f.now()
	}
	if pr.Updated.IsZero() {
		pr.Updated = pr.Created
	}
	f.ensureUser(pr.User, "")
	p := pr
	p.Files = append([]PRFile(nil), pr.Files...)
	rs.prs[pr.Number] = &p
	rs.issues[pr.Number] = &Issue{Number: pr.Number, Title: pr.Title, Body: pr.Body, User: pr.User, State: pr.State, IsPR: true, Created: pr.Created, Updated: pr.Updated}
	return &p
}

// Issue returns a copy of issue n.
func (f *Fake) Issue(repo string, n int) (Issue, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs, ok := f.repos[strings.ToLower(repo)]
	if !ok || rs.issues[n] == nil {
		return Issue{}, false
	}
	return *rs.issues[n], true
}

// PR returns a copy of pull request n with current head/base SHAs.
func (f *Fake) PR(repo string, n int) (PullRequest, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs, ok := f.repos[strings.ToLower(repo)]
	if !ok || rs.prs[n] == nil {
		return PullRequest{}, false
	}
	return f.prView(rs, rs.prs[n]), true
}

func (f *Fake) prView(rs *repoState, p *PullRequest) PullRequest {
	v := *p
	if s, ok := rs.refs["refs/heads/"+p.Head]; ok && p.HeadRepo == "" {
		v.HeadSHA = s
	}
	if s, ok := rs.refs["refs/heads/"+p.Base]; ok {
		v.BaseSHA = s
	}
	return v
}

// PRs returns copies of all pull requests of repo, by number.
func (f *Fake) PRs(repo string) []PullRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs, ok := f.repos[strings.ToLower(repo)]
	if !ok {
		return nil
	}
	var out []PullRequest
	for _, p := range rs.prs {
		out = append(out, f.prView(rs, p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// Comments returns copies of the comments on issue or PR n, oldest first.
func (f *Fake) Comments(repo string, n int) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commentsOf(strings.ToLower(repo), n)
}

func (f *Fake) commentsOf(rk string, n int) []Comment {
	var out []Comment
	for id, c := range f.comments {
		if f.commentRepo[id] == rk && c.Issue == n {
			cc := *c
			cc.Reactions = append([]string(nil), c.Reactions...)
			out = append(out, cc)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AddComment seeds a comment on issue or PR n by login and returns its id.
func (f *Fake) AddComment(repo string, n int, login, body string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ensureUser(login, "")
	now := f.now().UTC()
	c := &Comment{ID: f.id(), Issue: n, Body: body, User: login, Created: now, Updated: now}
	f.comments[c.ID] = c
	f.commentRepo[c.ID] = strings.ToLower(repo)
	return c.ID
}

// Reviews returns copies of the reviews on pull request n, oldest first.
func (f *Fake) Reviews(repo string, n int) []Review {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Review
	for _, r := range f.reviews[strings.ToLower(repo)] {
		if r.PR == n {
			rr := *r
			rr.Comments = append([]int64(nil), r.Comments...)
			out = append(out, rr)
		}
	}
	return out
}

// ReviewComments returns copies of the diff comments on pull request n.
func (f *Fake) ReviewComments(repo string, n int) []ReviewComment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []ReviewComment
	for _, c := range f.reviewComments[strings.ToLower(repo)] {
		if c.PR == n {
			out = append(out, *c)
		}
	}
	return out
}

// FailNext makes the next n requests (GraphQL included) fail with fl
// before they reach any handler.
func (f *Fake) FailNext(n int, fl Failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := 0; i < n; i++ {
		f.failures = append(f.failures, fl)
	}
}

// Requests returns every request received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Violations returns the requests the spec does not allow or the fake does
// not implement.
func (f *Fake) Violations() []Violation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Violation(nil), f.violations...)
}

// CheckNoViolations fails the test (t.Errorf) listing every violation.
func (f *Fake) CheckNoViolations(tb TB) {
	tb.Helper()
	for _, v := range f.Violations() {
		tb.Errorf("fake GitHub: request outside the OpenAPI description: %s", v)
	}
}

// ServeHTTP implements http.Handler.
func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	if f.serveGit(w, r) || f.serveOAuth(w, r) {
		return
	}
	f.syncGitRefs()
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	graphql := false
	switch {
	case path == "/api/graphql":
		graphql = true
	case strings.HasPrefix(path, "/api/v3/"):
		path = strings.TrimPrefix(path, "/api/v3")
	case path == "/graphql":
		graphql = true
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	rec := Request{Method: r.Method, Path: path}
	rw := &recorder{ResponseWriter: w}
	var op *Operation
	defer func() {
		rec.Status = rw.status
		f.requests = append(f.requests, rec)
		f.calls[callKey(rec)]++
		if op != nil {
			if err := f.spec.ValidateResponse(op, rw.status, rw.Header().Get("Content-Type"), rw.body.Bytes()); err != nil {
				f.violations = append(f.violations, Violation{Method: r.Method, Path: path, Status: rw.status, Reason: err.Error()})
			}
		}
	}()

	var params map[string]string
	var rt route
	if graphql {
		rec.Op = "graphql"
		if r.Method != http.MethodPost {
			f.violation(rw, r.Method, path, http.StatusNotFound, "GraphQL takes POST only")
			return
		}
		rt = route{h: func(c *call) { f.graphql(c) }}
	} else {
		var ok bool
		matched, p, ok := f.spec.Match(r.Method, path)
		if !ok {
			f.violation(rw, r.Method, path, http.StatusNotFound, "no operation in GitHub's OpenAPI description matches")
			return
		}
		params = p
		rec.Op = matched.Path
		if rt, ok = f.routes[r.Method+" "+matched.Path]; !ok {
			f.violation(rw, r.Method, path, http.StatusNotFound, "operation "+matched.OperationID+" ("+matched.Path+") exists but the fake does not implement it")
			return
		}
		if err := f.spec.ValidateBody(matched, body); err != nil {
			f.violation(rw, r.Method, path, http.StatusUnprocessableEntity, err.Error())
			return
		}
		op = matched // from here on, the fake's answer is checked too
	}

	if len(f.failures) > 0 {
		fl := f.failures[0]
		f.failures = f.failures[1:]
		f.fail(rw, fl)
		return
	}

	id, status, msg := f.authenticate(r)
	if status != 0 {
		writeError(rw, status, msg)
		return
	}
	rec.Actor = f.actor(id)
	f.rateHeaders(rw, r.Header.Get("Authorization"))
	if status, msg := rt.auth.admits(id); status != 0 {
		writeError(rw, status, msg)
		return
	}
	rt.h(&call{f: f, w: rw, r: r, id: id, params: params, body: body})
}

// callKey names an endpoint for Calls: "METHOD /template", GraphQL as
// "POST /graphql", a path outside the description as itself.
func callKey(r Request) string {
	switch r.Op {
	case "graphql":
		return r.Method + " /graphql"
	case "":
		return r.Method + " " + r.Path
	}
	return r.Method + " " + r.Op
}

type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (f *Fake) violation(w http.ResponseWriter, method, path string, status int, reason string) {
	f.violations = append(f.violations, Violation{Method: method, Path: path, Status: status, Reason: reason})
	writeError(w, status, reason)
}

func (f *Fake) fail(w http.ResponseWriter, fl Failure) {
	h := w.Header()
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Resource", "core")
	if fl.RateLimited {
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Used", "5000")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(f.now().Add(fl.ResetIn).Unix(), 10))
	} else {
		h.Set("X-RateLimit-Remaining", "4999")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(f.now().Add(time.Hour).Unix(), 10))
	}
	if fl.RetryAfter != "" {
		h.Set("Retry-After", fl.RetryAfter)
	}
	msg := fl.Message
	if msg == "" {
		msg = http.StatusText(fl.Status)
		if fl.RetryAfter != "" || fl.Status == http.StatusTooManyRequests {
			msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
		}
		if fl.RateLimited {
			msg = "API rate limit exceeded."
		}
	}
	doc := "https://docs.github.com/rest"
	if fl.RetryAfter != "" || fl.Status == http.StatusTooManyRequests {
		doc = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	}
	writeJSON(w, fl.Status, map[string]any{"message": msg, "documentation_url": doc})
}

func (f *Fake) rateHeaders(w http.ResponseWriter, auth string) {
	rem, ok := f.rateRemaining[auth]
	if !ok {
		rem = 5000
	}
	rem--
	if rem < 1 {
		rem = 1 // the fake never runs dry by itself; use FailNext for that
	}
	f.rateRemaining[auth] = rem
	h := w.Header()
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(rem))
	h.Set("X-RateLimit-Used", strconv.Itoa(5000-rem))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(f.now().Add(time.Hour).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if v == nil {
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	_, _ = w.Write(buf.Bytes())
}

// writeSimpleError answers like the operations whose 422 is a
// validation-error-simple: "errors" is a list of strings.
func writeSimpleError(w http.ResponseWriter, status int, msg string, errs ...string) {
	body := map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)}
	if len(errs) > 0 {
		body["errors"] = errs
	}
	writeJSON(w, status, body)
}

func writeError(w http.ResponseWriter, status int, msg string, errs ...map[string]any) {
	body := map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)}
	if len(errs) > 0 {
		body["errors"] = errs
	}
	writeJSON(w, status, body)
}

func fullRef(ref string) string {
	if strings.HasPrefix(ref, "refs/") {
		return ref
	}
	return "refs/" + ref
}
