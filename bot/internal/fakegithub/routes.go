package fakegithub

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// call is one request being handled; f.mu is held.
type call struct {
	f      *Fake
	w      http.ResponseWriter
	r      *http.Request
	id     *identity
	params map[string]string
	body   []byte
}

type handler func(c *call)

// coreRoutes are the fake's REST routes, keyed "METHOD <spec path
// template>"; routeTable adds the other files' tables to them.
var coreRoutes = map[string]route{
	"GET /user":             {h: getUser},
	"GET /users/{username}": {h: getUserByLogin},
	"GET /app":              {h: getApp, auth: authJWT},
	"POST /app/installations/{installation_id}/access_tokens":       {h: createInstallationToken, auth: authJWT},
	"GET /repos/{owner}/{repo}/installation":                        {h: getRepoInstallation, auth: authJWT},
	"GET /repos/{owner}/{repo}":                                     {h: getRepo},
	"GET /repos/{owner}/{repo}/collaborators/{username}/permission": {h: getPermission},

	"GET /repos/{owner}/{repo}/issues":                                  {h: listIssues},
	"POST /repos/{owner}/{repo}/issues":                                 {h: createIssue},
	"GET /repos/{owner}/{repo}/issues/{issue_number}":                   {h: getIssue},
	"GET /repos/{owner}/{repo}/issues/{issue_number}/comments":          {h: listComments},
	"POST /repos/{owner}/{repo}/issues/{issue_number}/comments":         {h: createComment},
	"GET /repos/{owner}/{repo}/issues/comments/{comment_id}":            {h: getComment},
	"PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}":          {h: editComment},
	"DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}":         {h: deleteComment},
	"POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions": {h: createReaction},
	"GET /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions":  {h: listReactions},

	"GET /repos/{owner}/{repo}/pulls":                                              {h: listPRs},
	"POST /repos/{owner}/{repo}/pulls":                                             {h: createPR},
	"GET /repos/{owner}/{repo}/pulls/{pull_number}":                                {h: getPR},
	"PATCH /repos/{owner}/{repo}/pulls/{pull_number}":                              {h: updatePR},
	"GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews":                        {h: listReviews},
	"POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews":                       {h: createReview},
	"GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}":            {h: getReview},
	"PUT /repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/dismissals": {h: dismissReview},
	"GET /repos/{owner}/{repo}/pulls/{pull_number}/comments":                       {h: listReviewComments},
	"POST /repos/{owner}/{repo}/pulls/{pull_number}/comments":                      {h: createReviewComment},
	"GET /repos/{owner}/{repo}/git/ref/{ref}":                                      {h: getRef},
	"POST /repos/{owner}/{repo}/git/refs":                                          {h: createRef},
	"PATCH /repos/{owner}/{repo}/git/refs/{ref}":                                   {h: updateRef},
	"DELETE /repos/{owner}/{repo}/git/refs/{ref}":                                  {h: deleteRef},

	"GET /repos/{owner}/{repo}/pulls/{pull_number}/files":     {h: listPRFiles},
	"GET /repos/{owner}/{repo}/labels":                        {h: listRepoLabels},
	"GET /repos/{owner}/{repo}/issues/{issue_number}/labels":  {h: listIssueLabels},
	"POST /repos/{owner}/{repo}/issues/{issue_number}/labels": {h: addIssueLabels},
	"DELETE /installation/token":                              {h: revokeInstallationToken},
	"POST /repos/{owner}/{repo}/git/blobs":                    {h: createBlob},
	"POST /repos/{owner}/{repo}/git/trees":                    {h: createTree},
	"POST /repos/{owner}/{repo}/git/commits":                  {h: createGitCommit},
	"GET /repos/{owner}/{repo}/git/commits/{commit_sha}":      {h: getGitCommit},
}

// routeTable builds the fake's route table, keyed "METHOD <spec path
// template>": the core routes and the delivery-log routes
// (appdeliveries.go). Each fake builds its own (NewWithSpec); a route two
// tables both claim is a programming error. TestRoutesExistInSpec checks
// that every key is an operation of GitHub's OpenAPI description.
func routeTable() map[string]route {
	parts := []map[string]route{coreRoutes, appDeliveryRoutes}
	t := make(map[string]route, len(coreRoutes)+len(appDeliveryRoutes))
	for _, part := range parts {
		for k, r := range part {
			if _, dup := t[k]; dup {
				panic("fakegithub: route " + k + " is registered twice")
			}
			t[k] = r
		}
	}
	return t
}

// RouteKeys returns the fake's routes as "METHOD template", sorted.
func RouteKeys() []string {
	routes := routeTable()
	out := make([]string, 0, len(routes))
	for k := range routes {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sha(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// --- identity helpers ---

func (c *call) login() string {
	if c.id == nil {
		return ""
	}
	if c.id.user != nil {
		return c.id.user.Login
	}
	if c.id.installation != 0 {
		return c.f.installationLogin(c.id.installation)
	}
	return ""
}

func (c *call) perm(rs *repoState, login string) string {
	if strings.EqualFold(login, rs.Owner) {
		return PermAdmin
	}
	if p, ok := rs.perms[strings.ToLower(login)]; ok {
		return p
	}
	return PermNone
}

// installed reports whether the caller is an installation token of the
// installation that holds rs.
func (c *call) installed(rs *repoState) bool {
	return c.id.installation != 0 && rs.installationID == c.id.installation
}

// repo resolves {owner}/{repo} and checks the caller may see it, as
// GitHub does: an installation token sees its installation's repositories
// and, read-only, public ones (writes to those are 403 "Resource not
// accessible by integration"); anything private it cannot see is 404.
func (c *call) repo() *repoState {
	rs, ok := c.f.repos[key(c.params["owner"], c.params["repo"])]
	if !ok {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return nil
	}
	if c.id.installation != 0 {
		switch {
		case c.installed(rs):
			return rs
		case rs.Private:
			writeError(c.w, http.StatusNotFound, "Not Found")
			return nil
		case c.r.Method != http.MethodGet:
			writeError(c.w, http.StatusForbidden, "Resource not accessible by integration")
			return nil
		}
		return rs
	}
	if rs.Private && c.perm(rs, c.login()) == PermNone {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return nil
	}
	return rs
}

// canWrite reports whether the caller may push or manage pull requests.
func (c *call) canWrite(rs *repoState) bool {
	if c.installed(rs) {
		return true
	}
	switch c.perm(rs, c.login()) {
	case PermAdmin, PermMaintain, PermWrite:
		return true
	}
	writeError(c.w, http.StatusForbidden, "Resource not accessible by personal access token")
	return false
}

func (c *call) decode(v any) bool {
	if err := json.Unmarshal(c.body, v); err != nil {
		writeError(c.w, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

func (c *call) intParam(name string) int64 {
	n, _ := strconv.ParseInt(c.params[name], 10, 64) // the spec match already checked it is an integer
	return n
}

// page writes one page of a list, as GitHub does: per_page (default 30,
// at most 100) and page (from 1) from the query, and a Link header with
// rel="next" and rel="last" when there is more.
func (c *call) page(items []any) {
	q := c.r.URL.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per <= 0 {
		per = 30
	}
	if per > 100 {
		per = 100
	}
	pg, err := strconv.Atoi(q.Get("page"))
	if err != nil || pg <= 0 {
		pg = 1
	}
	last := (len(items) + per - 1) / per
	if last == 0 {
		last = 1
	}
	lo, hi := (pg-1)*per, pg*per
	if lo > len(items) {
		lo = len(items)
	}
	if hi > len(items) {
		hi = len(items)
	}
	if pg < last {
		link := func(n int, rel string) string {
			u := *c.r.URL
			u.Scheme, u.Host = "http", c.r.Host
			qq := u.Query()
			qq.Set("page", strconv.Itoa(n))
			qq.Set("per_page", strconv.Itoa(per))
			u.RawQuery = qq.Encode()
			return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
		}
		c.w.Header().Set("Link", link(pg+1, "next")+", "+link(last, "last"))
	}
	writeJSON(c.w, http.StatusOK, items[lo:hi])
}

func tooLong(w http.ResponseWriter, resource, field, body string) bool {
	if len([]rune(body)) > MaxBodyChars {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{
			"resource": resource, "field": field, "code": "custom",
			"message": fmt.Sprintf("%s is too long (maximum is %d characters)", field, MaxBodyChars),
		})
		return true
	}
	return false
}

// --- users and apps ---

func getUser(c *call) {
	if c.id.installation != 0 {
		writeError(c.w, http.StatusForbidden, "Resource not accessible by integration")
		return
	}
	writeJSON(c.w, http.StatusOK, c.f.publicUserJSON(c.id.user.Login))
}

// getUserByLogin is GET /users/{username}: public account data, for any
// token (an app's JWT is refused, like everywhere outside /app).
func getUserByLogin(c *call) {
	u, ok := c.f.users[strings.ToLower(c.params["username"])]
	if !ok {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(c.w, http.StatusOK, c.f.publicUserJSON(u.Login))
}

func getApp(c *call) {
	writeJSON(c.w, http.StatusOK, c.f.appJSON(c.id.app))
}

func createInstallationToken(c *call) {
	inst := c.intParam("installation_id")
	if c.f.installs[inst] != c.id.app.ID {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	tok := fmt.Sprintf("ghs_fake%d_%d", inst, c.f.id())
	exp := c.f.now().Add(InstallationTokenLifetime)
	c.f.tokens[tok] = &identity{installation: inst, expires: exp}
	writeJSON(c.w, http.StatusCreated, map[string]any{
		"token": tok, "expires_at": exp.UTC().Format(time.RFC3339),
		"permissions": appPermissions, "repository_selection": "selected",
	})
}

func getRepoInstallation(c *call) {
	rs, ok := c.f.repos[key(c.params["owner"], c.params["repo"])]
	if !ok || rs.installationID == 0 || c.f.installs[rs.installationID] != c.id.app.ID {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(c.w, http.StatusOK, c.f.installationJSON(rs.installationID, c.id.app, rs.Owner))
}

func getRepo(c *call) {
	if rs := c.repo(); rs != nil {
		writeJSON(c.w, http.StatusOK, c.f.repoJSON(rs))
	}
}

func getPermission(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	login := c.params["username"]
	u, ok := c.f.users[strings.ToLower(login)]
	if !ok {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	p := c.perm(rs, u.Login)
	user := c.f.userJSON(u.Login)
	user["role_name"] = p
	user["permissions"] = map[string]bool{
		"admin": p == PermAdmin, "maintain": p == PermAdmin || p == PermMaintain,
		"push": p == PermAdmin || p == PermMaintain || p == PermWrite, "triage": p != PermRead && p != PermNone,
		"pull": p != PermNone,
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"permission": legacyPermission(p), "role_name": p, "user": user})
}

// legacyPermission maps role names onto the "permission" field, which real
// GitHub reports as admin, write, read or none (maintain → write,
// triage → read); role_name carries the precise role.
func legacyPermission(p string) string {
	switch p {
	case PermMaintain:
		return PermWrite
	case PermTriage:
		return PermRead
	}
	return p
}

// --- issues and comments ---

func getIssue(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	is := rs.issues[int(c.intParam("issue_number"))]
	if is == nil {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(c.w, http.StatusOK, c.f.issueJSON(rs, is))
}

func listComments(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	n := int(c.intParam("issue_number"))
	if rs.issues[n] == nil {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	out := []any{}
	for _, cm := range c.f.commentsOf(key(rs.Owner, rs.Name), n) {
		cm := cm
		out = append(out, c.f.commentJSON(rs, &cm))
	}
	c.page(out)
}

func createComment(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	n := int(c.intParam("issue_number"))
	if rs.issues[n] == nil {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	var in struct {
		Body string `json:"body"`
	}
	if !c.decode(&in) || tooLong(c.w, "IssueComment", "body", in.Body) {
		return
	}
	now := c.f.now().UTC()
	cm := &Comment{ID: c.f.id(), Issue: n, Body: in.Body, User: c.login(), Created: now, Updated: now}
	c.f.comments[cm.ID] = cm
	c.f.commentRepo[cm.ID] = key(rs.Owner, rs.Name)
	c.w.Header().Set("Location", c.f.commentJSON(rs, cm)["url"].(string))
	writeJSON(c.w, http.StatusCreated, c.f.commentJSON(rs, cm))
	c.f.deliverComment(rs, "created", c.login(), cm)
}

func (c *call) comment(rs *repoState) *Comment {
	id := c.intParam("comment_id")
	cm, ok := c.f.comments[id]
	if !ok || c.f.commentRepo[id] != key(rs.Owner, rs.Name) {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return nil
	}
	return cm
}

func getComment(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	if cm := c.comment(rs); cm != nil {
		writeJSON(c.w, http.StatusOK, c.f.commentJSON(rs, cm))
	}
}

func editComment(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	cm := c.comment(rs)
	if cm == nil {
		return
	}
	if !strings.EqualFold(cm.User, c.login()) && c.id.installation == 0 && !c.canWrite(rs) {
		return
	}
	var in struct {
		Body string `json:"body"`
	}
	if !c.decode(&in) || tooLong(c.w, "IssueComment", "body", in.Body) {
		return
	}
	cm.Body = in.Body
	cm.Updated = c.f.now().UTC()
	writeJSON(c.w, http.StatusOK, c.f.commentJSON(rs, cm))
	c.f.deliverComment(rs, "edited", c.login(), cm)
}

func deleteComment(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	cm := c.comment(rs)
	if cm == nil {
		return
	}
	if !strings.EqualFold(cm.User, c.login()) && c.id.installation == 0 && !c.canWrite(rs) {
		return
	}
	delete(c.f.comments, cm.ID)
	delete(c.f.commentRepo, cm.ID)
	c.w.WriteHeader(http.StatusNoContent)
}

var reactionContents = map[string]bool{"+1": true, "-1": true, "laugh": true, "confused": true, "heart": true, "hooray": true, "rocket": true, "eyes": true}

func createReaction(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	cm := c.comment(rs)
	if cm == nil {
		return
	}
	var in struct {
		Content string `json:"content"`
	}
	if !c.decode(&in) {
		return
	}
	if !reactionContents[in.Content] { // the spec's enum already says so; kept for NewWithSpec users
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	status := http.StatusCreated
	for _, r := range cm.Reactions {
		if r == c.login()+":"+in.Content {
			status = http.StatusOK // GitHub answers 200 for a reaction that already exists
		}
	}
	if status == http.StatusCreated {
		cm.Reactions = append(cm.Reactions, c.login()+":"+in.Content)
	}
	writeJSON(c.w, status, map[string]any{
		"id": c.f.id(), "node_id": "REA_fake", "user": c.f.userJSON(c.login()), "content": in.Content,
		"created_at": c.f.now().UTC().Format(time.RFC3339),
	})
}

func listReactions(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	cm := c.comment(rs)
	if cm == nil {
		return
	}
	out := []any{}
	for i, r := range cm.Reactions {
		login, content, _ := strings.Cut(r, ":")
		out = append(out, map[string]any{"id": i + 1, "node_id": "REA_fake", "user": c.f.userJSON(login), "content": content, "created_at": c.f.now().UTC().Format(time.RFC3339)})
	}
	c.page(out)
}

// --- pull requests ---

// repoPR resolves the path's repository and pull request; p is nil (and
// the error answered) if either is missing.
func (c *call) repoPR() (rs *repoState, p *PullRequest) {
	if rs = c.repo(); rs == nil {
		return nil, nil
	}
	return rs, c.pr(rs)
}

func (c *call) pr(rs *repoState) *PullRequest {
	p := rs.prs[int(c.intParam("pull_number"))]
	if p == nil {
		writeError(c.w, http.StatusNotFound, "Not Found")
	}
	return p
}

func listPRs(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	state := c.r.URL.Query().Get("state")
	if state == "" {
		state = "open"
	}
	head := c.r.URL.Query().Get("head")
	out := []any{}
	nums := make([]int, 0, len(rs.prs))
	for n := range rs.prs {
		nums = append(nums, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(nums)))
	for _, n := range nums {
		p := rs.prs[n]
		if state != "all" && p.State != state {
			continue
		}
		if head != "" && head != rs.Owner+":"+p.Head {
			continue
		}
		out = append(out, c.f.prJSON(rs, p))
	}
	c.page(out)
}

func createPR(c *call) {
	rs := c.repo()
	if rs == nil || !c.canWrite(rs) {
		return
	}
	var in struct {
		Title, Body, Head, Base string
		Draft                   bool
	}
	if !c.decode(&in) || tooLong(c.w, "PullRequest", "body", in.Body) || c.actionsMayNotCreatePR(rs) {
		return
	}
	head := in.Head
	if owner, branch, ok := strings.Cut(head, ":"); ok {
		if !strings.EqualFold(owner, rs.Owner) {
			writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": "head", "code": "invalid", "message": "the fake serves same-repository heads only"})
			return
		}
		head = branch
	}
	headSHA, okH := rs.refs["refs/heads/"+head]
	baseSHA, okB := rs.refs["refs/heads/"+in.Base]
	switch {
	case in.Title == "":
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": "title", "code": "missing_field"})
		return
	case !okH:
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": "head", "code": "invalid"})
		return
	case !okB:
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": "base", "code": "invalid"})
		return
	case headSHA == baseSHA:
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "code": "custom", "message": fmt.Sprintf("No commits between %s and %s", in.Base, head)})
		return
	}
	for _, p := range rs.prs {
		if p.State == "open" && p.Head == head && p.Base == in.Base {
			writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "code": "custom", "message": fmt.Sprintf("A pull request already exists for %s:%s.", rs.Owner, head)})
			return
		}
	}
	p := c.f.addPR(rs, PullRequest{Title: in.Title, Body: in.Body, User: c.login(), Draft: in.Draft, Head: head, Base: in.Base})
	writeJSON(c.w, http.StatusCreated, c.f.prJSON(rs, p))
	c.f.deliverPR(rs, "opened", c.login(), p, nil)
}

// getPR answers the pull request as JSON, or (Accept:
// application/vnd.github.diff) as its unified diff, which is only
// available for a pull request seeded with Files.
func getPR(c *call) {
	rs, p := c.repoPR()
	if p == nil {
		return
	}
	if wantsDiff(c.r) {
		if p.Files == nil {
			writeError(c.w, http.StatusNotAcceptable, "the fake has no diff for this pull request (seed PullRequest.Files)")
			return
		}
		c.w.Header().Set("Content-Type", "application/vnd.github.diff; charset=utf-8")
		c.w.WriteHeader(http.StatusOK)
		_, _ = c.w.Write([]byte(unifiedDiff(p)))
		return
	}
	writeJSON(c.w, http.StatusOK, c.f.prJSON(rs, p))
}

func updatePR(c *call) {
	rs, p := c.repoPR()
	if p == nil || !c.canWrite(rs) {
		return
	}
	var in struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
		Base  *string `json:"base"`
	}
	if !c.decode(&in) {
		return
	}
	if in.Body != nil && tooLong(c.w, "PullRequest", "body", *in.Body) {
		return
	}
	if in.Base != nil {
		if _, ok := rs.refs["refs/heads/"+*in.Base]; !ok {
			writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequest", "field": "base", "code": "invalid"})
			return
		}
		p.Base = *in.Base
	}
	if in.Title != nil {
		p.Title = *in.Title
	}
	if in.Body != nil {
		p.Body = *in.Body
	}
	action := "edited"
	if in.State != nil && !p.Merged && *in.State != p.State {
		p.State = *in.State
		action = map[string]string{"closed": "closed", "open": "reopened"}[p.State]
	}
	p.Updated = c.f.now()
	if is := rs.issues[p.Number]; is != nil {
		is.Title, is.Body, is.State, is.Updated = p.Title, p.Body, p.State, p.Updated
	}
	writeJSON(c.w, http.StatusOK, c.f.prJSON(rs, p))
	c.f.deliverPR(rs, action, c.login(), p, nil)
}

func listReviews(c *call) {
	rs, p := c.repoPR()
	if p == nil {
		return
	}
	out := []any{}
	for _, rv := range c.f.reviews[key(rs.Owner, rs.Name)] {
		if rv.PR == p.Number {
			out = append(out, c.f.reviewJSON(rs, rv))
		}
	}
	c.page(out)
}

func (c *call) review(rs *repoState, p *PullRequest) *Review {
	id := c.intParam("review_id")
	for _, rv := range c.f.reviews[key(rs.Owner, rs.Name)] {
		if rv.ID == id && rv.PR == p.Number {
			return rv
		}
	}
	writeError(c.w, http.StatusNotFound, "Not Found")
	return nil
}

func createReview(c *call) {
	rs, p := c.repoPR()
	if p == nil {
		return
	}
	var in struct {
		CommitID string `json:"commit_id"`
		Body     string `json:"body"`
		Event    string `json:"event"`
		Comments []struct {
			Path      string `json:"path"`
			Position  int    `json:"position"`
			Line      int    `json:"line"`
			Side      string `json:"side"`
			StartLine int    `json:"start_line"`
			StartSide string `json:"start_side"`
			Body      string `json:"body"`
		} `json:"comments"`
	}
	if !c.decode(&in) || tooLong(c.w, "PullRequestReview", "body", in.Body) {
		return
	}
	me := c.login()
	self := strings.EqualFold(me, p.User)
	state := ""
	switch in.Event {
	case "APPROVE":
		if self {
			writeSimpleError(c.w, http.StatusUnprocessableEntity, "Unprocessable Entity", "Can not approve your own pull request")
			return
		}
		state = "APPROVED"
	case "REQUEST_CHANGES":
		if self {
			writeSimpleError(c.w, http.StatusUnprocessableEntity, "Unprocessable Entity", "Can not request changes on your own pull request")
			return
		}
		state = "CHANGES_REQUESTED"
	case "COMMENT":
		state = "COMMENTED"
	case "":
		state = "PENDING"
	}
	if (in.Event == "COMMENT" || in.Event == "REQUEST_CHANGES") && in.Body == "" && len(in.Comments) == 0 {
		writeSimpleError(c.w, http.StatusUnprocessableEntity, "Unprocessable Entity", "Review body is required")
		return
	}
	v := c.f.prView(rs, p)
	commit := in.CommitID
	if commit == "" {
		commit = v.HeadSHA
	}
	rv := &Review{ID: c.f.id(), PR: p.Number, User: me, Body: in.Body, State: state, CommitID: commit, Submitted: c.f.now()}
	for _, cm := range in.Comments {
		if cm.Path == "" || (cm.Line == 0 && cm.Position == 0) {
			writeSimpleError(c.w, http.StatusUnprocessableEntity, "Unprocessable Entity", "review comments need a path and a line (or position) in the diff")
			return
		}
		if tooLong(c.w, "PullRequestReviewComment", "body", cm.Body) {
			return
		}
		line := cm.Line
		if line == 0 {
			line = cm.Position
		}
		// GitHub checks every comment before it keeps any: a review is
		// created whole or not at all.
		if msg := placeComment(p, cm.Path, line, cm.Side, cm.StartLine, cm.StartSide); msg != "" {
			writeSimpleError(c.w, http.StatusUnprocessableEntity, "Unprocessable Entity", msg)
			return
		}
	}
	rk := key(rs.Owner, rs.Name)
	for _, cm := range in.Comments {
		line := cm.Line
		if line == 0 {
			line = cm.Position
		}
		side := cm.Side
		if side == "" {
			side = "RIGHT"
		}
		startSide := ""
		if cm.StartLine != 0 {
			startSide = cm.StartSide
			if startSide == "" {
				startSide = side
			}
		}
		rc := &ReviewComment{ID: c.f.id(), PR: p.Number, ReviewID: rv.ID, User: me, Body: cm.Body, Path: cm.Path, Line: line, Side: side, StartLine: cm.StartLine, StartSide: startSide, CommitID: commit, Created: c.f.now()}
		c.f.reviewComments[rk] = append(c.f.reviewComments[rk], rc)
		rv.Comments = append(rv.Comments, rc.ID)
	}
	c.f.reviews[rk] = append(c.f.reviews[rk], rv)
	writeJSON(c.w, http.StatusOK, c.f.reviewJSON(rs, rv))
	if rv.State != "PENDING" {
		c.f.deliverReview(rs, "submitted", me, p, rv)
	}
}

func getReview(c *call) {
	rs, p := c.repoPR()
	if p == nil {
		return
	}
	if rv := c.review(rs, p); rv != nil {
		writeJSON(c.w, http.StatusOK, c.f.reviewJSON(rs, rv))
	}
}

func dismissReview(c *call) {
	rs, p := c.repoPR()
	if p == nil || !c.canWrite(rs) {
		return
	}
	rv := c.review(rs, p)
	if rv == nil {
		return
	}
	if rv.State != "APPROVED" && rv.State != "CHANGES_REQUESTED" {
		writeError(c.w, http.StatusUnprocessableEntity, "Can not dismiss a "+strings.ToLower(rv.State)+" pull request review")
		return
	}
	rv.State = "DISMISSED"
	writeJSON(c.w, http.StatusOK, c.f.reviewJSON(rs, rv))
	c.f.deliverReview(rs, "dismissed", c.login(), p, rv)
}

func listReviewComments(c *call) {
	rs, p := c.repoPR()
	if p == nil {
		return
	}
	out := []any{}
	for _, rc := range c.f.reviewComments[key(rs.Owner, rs.Name)] {
		if rc.PR == p.Number {
			out = append(out, c.f.reviewCommentJSON(rs, rc))
		}
	}
	c.page(out)
}

func createReviewComment(c *call) {
	rs, p := c.repoPR()
	if p == nil {
		return
	}
	var in struct {
		Body      string `json:"body"`
		CommitID  string `json:"commit_id"`
		Path      string `json:"path"`
		Line      int    `json:"line"`
		Position  int    `json:"position"`
		Side      string `json:"side"`
		StartLine int    `json:"start_line"`
		StartSide string `json:"start_side"`
	}
	if !c.decode(&in) || tooLong(c.w, "PullRequestReviewComment", "body", in.Body) {
		return
	}
	if in.Line == 0 && in.Position == 0 {
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "PullRequestReviewComment", "field": "line", "code": "missing_field"})
		return
	}
	line := in.Line
	if line == 0 {
		line = in.Position
	}
	if msg := placeComment(p, in.Path, line, in.Side, in.StartLine, in.StartSide); msg != "" {
		notInDiff(c.w, msg)
		return
	}
	rc := &ReviewComment{ID: c.f.id(), PR: p.Number, User: c.login(), Body: in.Body, Path: in.Path, Line: line, Side: in.Side, StartLine: in.StartLine, StartSide: in.StartSide, CommitID: in.CommitID, Created: c.f.now()}
	rk := key(rs.Owner, rs.Name)
	c.f.reviewComments[rk] = append(c.f.reviewComments[rk], rc)
	writeJSON(c.w, http.StatusCreated, c.f.reviewCommentJSON(rs, rc))
}

func inDiff(p *PullRequest, path string, line int) bool {
	if p.DiffLines == nil {
		return true
	}
	for _, l := range p.DiffLines[path] {
		if l == line {
			return true
		}
	}
	return false
}

// notInDiff refuses a single review comment GitHub cannot place, with a
// validation-error (a review answers a validation-error-simple, whose
// errors are strings, instead): "pull_request_review_thread.line could not
// be resolved", as GitHub words it.
func notInDiff(w http.ResponseWriter, msg string) {
	field, text := "pull_request_review_thread.line", "could not be resolved"
	switch msg {
	case msgPathNotResolved:
		field = "pull_request_review_thread.path"
	case msgStartOtherHunk, msgStartAfterLine:
		field, text = "pull_request_review_thread.start_line", msg
	case msgBadSide:
		field, text = "pull_request_review_thread.side", msg
	}
	writeError(w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{
		"resource": "PullRequestReviewComment", "code": "custom", "field": field, "message": text,
	})
}

// --- git refs ---

func getRef(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	name := fullRef(c.params["ref"])
	s, ok := rs.refs[name]
	if !ok {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(c.w, http.StatusOK, c.f.refJSON(rs, name, s))
}

func hexSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func createRef(c *call) {
	rs := c.repo()
	if rs == nil || !c.canWrite(rs) {
		return
	}
	var in struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	}
	if !c.decode(&in) {
		return
	}
	if !strings.HasPrefix(in.Ref, "refs/") || strings.Count(in.Ref, "/") < 2 {
		writeError(c.w, http.StatusUnprocessableEntity, "Reference name must start with 'refs/' and have at least two slashes.")
		return
	}
	if !hexSHA(in.SHA) {
		writeError(c.w, http.StatusUnprocessableEntity, "Object does not exist")
		return
	}
	if _, ok := rs.refs[in.Ref]; ok && !c.f.gitBacked(rs) { // a git-backed ref is read from git (gitRef)
		writeError(c.w, http.StatusUnprocessableEntity, "Reference already exists")
		return
	}
	if backed, ok := c.gitRef(rs, in.Ref, in.SHA, true, false); backed && !ok {
		return
	}
	rs.refs[in.Ref] = in.SHA
	writeJSON(c.w, http.StatusCreated, c.f.refJSON(rs, in.Ref, in.SHA))
}

func updateRef(c *call) {
	rs := c.repo()
	if rs == nil || !c.canWrite(rs) {
		return
	}
	name := fullRef(c.params["ref"])
	if _, ok := rs.refs[name]; !ok && !c.f.gitBacked(rs) { // a git-backed ref is read from git (gitRef)
		writeError(c.w, http.StatusUnprocessableEntity, "Reference does not exist")
		return
	}
	var in struct {
		SHA   string `json:"sha"`
		Force bool   `json:"force"`
	}
	if !c.decode(&in) {
		return
	}
	if !hexSHA(in.SHA) {
		writeError(c.w, http.StatusUnprocessableEntity, "Object does not exist")
		return
	}
	if backed, ok := c.gitRef(rs, name, in.SHA, false, in.Force); backed && !ok {
		return
	}
	rs.refs[name] = in.SHA
	writeJSON(c.w, http.StatusOK, c.f.refJSON(rs, name, in.SHA))
}

func deleteRef(c *call) {
	rs := c.repo()
	if rs == nil || !c.canWrite(rs) {
		return
	}
	name := fullRef(c.params["ref"])
	if _, ok := rs.refs[name]; !ok {
		writeError(c.w, http.StatusUnprocessableEntity, "Reference does not exist")
		return
	}
	delete(rs.refs, name)
	c.w.WriteHeader(http.StatusNoContent)
}
