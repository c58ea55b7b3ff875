package fakegithub

import (
	"fmt"
	"net/url"
	"strings"
	"time"
)

// The fake's JSON views: every object carries the fields GitHub's
// description requires of it (checked by ValidateResponse), with the
// fake's own state where it has one and GitHub's conventions elsewhere
// (URL templates, zero counts, null for unset optional values).

// created is the fixed creation time of seeded accounts and repositories.
const created = "2024-01-01T00:00:00Z"

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// apiURL is the REST API root the fake's bodies link to, webURL the web
// root (Serve sets both to the server; GitHub's by default).
func (f *Fake) apiURL() string { return strings.TrimRight(f.api, "/") }
func (f *Fake) webURL() string { return strings.TrimRight(f.web, "/") }

func (f *Fake) userOf(login string) *User {
	if u := f.users[strings.ToLower(login)]; u != nil {
		return u
	}
	return &User{Login: login, Type: "User"}
}

// userJSON is a simple-user.
func (f *Fake) userJSON(login string) map[string]any {
	u := f.userOf(login)
	api := f.apiURL() + "/users/" + url.PathEscape(u.Login)
	return map[string]any{
		"login": u.Login, "id": u.ID, "node_id": fmt.Sprintf("U_fake%d", u.ID), "type": u.Type, "site_admin": false,
		"avatar_url":          fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", u.ID),
		"gravatar_id":         "",
		"url":                 api,
		"html_url":            f.webURL() + "/" + url.PathEscape(u.Login),
		"followers_url":       api + "/followers",
		"following_url":       api + "/following{/other_user}",
		"gists_url":           api + "/gists{/gist_id}",
		"starred_url":         api + "/starred{/owner}{/repo}",
		"subscriptions_url":   api + "/subscriptions",
		"organizations_url":   api + "/orgs",
		"repos_url":           api + "/repos",
		"events_url":          api + "/events{/privacy}",
		"received_events_url": api + "/received_events",
	}
}

// publicUserJSON is a public-user (GET /user, GET /users/{username}):
// exactly its properties, since the description allows no others.
func (f *Fake) publicUserJSON(login string) map[string]any {
	m := f.userJSON(login)
	u := f.userOf(login)
	var name any
	if u.Name != "" {
		name = u.Name
	}
	for k, v := range map[string]any{
		"name": name, "company": nil, "blog": "", "location": nil, "email": nil, "hireable": nil, "bio": nil,
		"public_repos": 0, "public_gists": 0, "followers": 0, "following": 0, "created_at": created, "updated_at": created,
	} {
		m[k] = v
	}
	return m
}

// repoJSON is a repository and a full-repository (the union of both's
// required fields).
func (f *Fake) repoJSON(rs *repoState) map[string]any {
	full := rs.Owner + "/" + rs.Name
	api := f.apiURL() + "/repos/" + full
	vis := "public"
	if rs.Private {
		vis = "private"
	}
	host := strings.TrimPrefix(strings.TrimPrefix(f.webURL(), "https://"), "http://")
	m := map[string]any{
		"id": rs.id, "node_id": fmt.Sprintf("R_fake%d", rs.id), "name": rs.Name, "full_name": full,
		"owner": f.userJSON(rs.Owner), "private": rs.Private, "visibility": vis, "description": nil,
		"fork": rs.Parent != "", "default_branch": rs.DefaultBranch, "homepage": nil, "language": nil,
		"html_url": f.webURL() + "/" + full, "url": api,
		"clone_url": f.webURL() + "/" + full + ".git", "git_url": "git://" + host + "/" + full + ".git",
		"ssh_url": "git@" + host + ":" + full + ".git", "svn_url": f.webURL() + "/" + full, "mirror_url": nil,
		"archive_url": api + "/{archive_format}{/ref}", "assignees_url": api + "/assignees{/user}",
		"blobs_url": api + "/git/blobs{/sha}", "branches_url": api + "/branches{/branch}",
		"collaborators_url": api + "/collaborators{/collaborator}", "comments_url": api + "/comments{/number}",
		"commits_url": api + "/commits{/sha}", "compare_url": api + "/compare/{base}...{head}",
		"contents_url": api + "/contents/{+path}", "contributors_url": api + "/contributors",
		"deployments_url": api + "/deployments", "downloads_url": api + "/downloads", "events_url": api + "/events",
		"forks_url": api + "/forks", "git_commits_url": api + "/git/commits{/sha}", "git_refs_url": api + "/git/refs{/sha}",
		"git_tags_url": api + "/git/tags{/sha}", "hooks_url": api + "/hooks", "issue_comment_url": api + "/issues/comments{/number}",
		"issue_events_url": api + "/issues/events{/number}", "issues_url": api + "/issues{/number}", "keys_url": api + "/keys{/key_id}",
		"labels_url": api + "/labels{/name}", "languages_url": api + "/languages", "merges_url": api + "/merges",
		"milestones_url": api + "/milestones{/number}", "notifications_url": api + "/notifications{?since,all,participating}",
		"pulls_url": api + "/pulls{/number}", "releases_url": api + "/releases{/id}", "stargazers_url": api + "/stargazers",
		"statuses_url": api + "/statuses/{sha}", "subscribers_url": api + "/subscribers", "subscription_url": api + "/subscription",
		"tags_url": api + "/tags", "teams_url": api + "/teams", "trees_url": api + "/git/trees{/sha}",
		"forks": 0, "forks_count": 0, "open_issues": 0, "open_issues_count": 0, "size": 0,
		"stargazers_count": 0, "watchers": 0, "watchers_count": 0, "network_count": 0, "subscribers_count": 0,
		"has_issues": !rs.NoIssues, "has_projects": true, "has_wiki": true, "has_pages": false, "has_discussions": false, "has_downloads": true,
		"archived": false, "disabled": false, "license": nil,
		"created_at": created, "updated_at": created, "pushed_at": ts(f.now()),
	}
	if p, ok := f.repos[strings.ToLower(rs.Parent)]; ok && rs.Parent != "" {
		parent := f.repoJSON(p)
		m["parent"], m["source"] = parent, parent
	}
	return m
}

func (f *Fake) association(rs *repoState, login string) string {
	if strings.EqualFold(login, rs.Owner) {
		return "OWNER"
	}
	switch rs.perms[strings.ToLower(login)] {
	case PermAdmin, PermMaintain, PermWrite, PermTriage, PermRead:
		return "COLLABORATOR"
	}
	return "NONE"
}

func (f *Fake) issueJSON(rs *repoState, is *Issue) map[string]any {
	full := rs.Owner + "/" + rs.Name
	api := fmt.Sprintf("%s/repos/%s/issues/%d", f.apiURL(), full, is.Number)
	n := 0
	for _, c := range f.comments {
		if c.Issue == is.Number && f.commentRepo[c.ID] == key(rs.Owner, rs.Name) {
			n++
		}
	}
	var closedAt any
	if is.State == "closed" {
		closedAt = ts(is.Updated)
	}
	m := map[string]any{
		"id": rs.id*100000 + int64(is.Number), "node_id": fmt.Sprintf("I_fake%d_%d", rs.id, is.Number),
		"number": is.Number, "title": is.Title, "body": is.Body, "state": is.State,
		"user": f.userJSON(is.User), "labels": f.issueLabelsJSON(rs, is), "assignee": nil, "assignees": []any{}, "milestone": nil,
		"comments": n, "locked": false, "closed_at": closedAt,
		"author_association": f.association(rs, is.User),
		"created_at":         ts(is.Created), "updated_at": ts(is.Updated),
		"url": api, "repository_url": f.apiURL() + "/repos/" + full,
		"labels_url": api + "/labels{/name}", "comments_url": api + "/comments", "events_url": api + "/events",
		"html_url": fmt.Sprintf("%s/%s/issues/%d", f.webURL(), full, is.Number),
	}
	if is.IsPR {
		m["html_url"] = fmt.Sprintf("%s/%s/pull/%d", f.webURL(), full, is.Number)
		m["pull_request"] = map[string]any{
			"url":       fmt.Sprintf("%s/repos/%s/pulls/%d", f.apiURL(), full, is.Number),
			"html_url":  fmt.Sprintf("%s/%s/pull/%d", f.webURL(), full, is.Number),
			"diff_url":  fmt.Sprintf("%s/%s/pull/%d.diff", f.webURL(), full, is.Number),
			"patch_url": fmt.Sprintf("%s/%s/pull/%d.patch", f.webURL(), full, is.Number),
		}
	}
	return m
}

func (f *Fake) commentJSON(rs *repoState, cm *Comment) map[string]any {
	full := rs.Owner + "/" + rs.Name
	return map[string]any{
		"id": cm.ID, "node_id": fmt.Sprintf("IC_fake%d", cm.ID), "body": cm.Body, "user": f.userJSON(cm.User),
		"created_at": ts(cm.Created), "updated_at": ts(cm.Updated),
		"author_association": f.association(rs, cm.User),
		"html_url":           fmt.Sprintf("%s/%s/issues/%d#issuecomment-%d", f.webURL(), full, cm.Issue, cm.ID),
		"issue_url":          fmt.Sprintf("%s/repos/%s/issues/%d", f.apiURL(), full, cm.Issue),
		"url":                fmt.Sprintf("%s/repos/%s/issues/comments/%d", f.apiURL(), full, cm.ID),
	}
}

func link(href string) map[string]any { return map[string]any{"href": href} }

func (f *Fake) prJSON(rs *repoState, p *PullRequest) map[string]any {
	v := f.prView(rs, p)
	full := rs.Owner + "/" + rs.Name
	api := fmt.Sprintf("%s/repos/%s/pulls/%d", f.apiURL(), full, p.Number)
	issue := fmt.Sprintf("%s/repos/%s/issues/%d", f.apiURL(), full, p.Number)
	html := fmt.Sprintf("%s/%s/pull/%d", f.webURL(), full, p.Number)
	statuses := fmt.Sprintf("%s/repos/%s/statuses/%s", f.apiURL(), full, v.HeadSHA)
	base := map[string]any{"ref": p.Base, "sha": v.BaseSHA, "label": rs.Owner + ":" + p.Base, "repo": f.repoJSON(rs), "user": f.userJSON(rs.Owner)}
	var closedAt, mergedAt any
	if p.State == "closed" {
		closedAt = ts(p.Updated)
	}
	if p.Merged {
		mergedAt = ts(p.Updated)
	}
	comments := 0
	for _, c := range f.comments {
		if c.Issue == p.Number && f.commentRepo[c.ID] == key(rs.Owner, rs.Name) {
			comments++
		}
	}
	reviewComments := 0
	for _, rc := range f.reviewComments[key(rs.Owner, rs.Name)] {
		if rc.PR == p.Number {
			reviewComments++
		}
	}
	return map[string]any{
		"id": rs.id*100000 + int64(p.Number), "node_id": p.NodeID, "number": p.Number,
		"title": p.Title, "body": p.Body, "state": p.State, "draft": p.Draft, "merged": p.Merged, "locked": false,
		"user": f.userJSON(p.User), "author_association": f.association(rs, p.User),
		"head": f.headJSON(rs, p, v.HeadSHA), "base": base,
		"assignee": nil, "assignees": []any{}, "requested_reviewers": []any{}, "requested_teams": []any{}, "labels": []any{}, "milestone": nil,
		"auto_merge": nil, "merged_by": nil, "merge_commit_sha": nil, "mergeable": nil, "mergeable_state": "unknown",
		"maintainer_can_modify": false, "closed_at": closedAt, "merged_at": mergedAt,
		"created_at": ts(p.Created), "updated_at": ts(p.Updated),
		"additions": 0, "deletions": 0, "changed_files": 0, "commits": 1, "comments": comments, "review_comments": reviewComments,
		"url": api, "html_url": html, "diff_url": html + ".diff", "patch_url": html + ".patch", "issue_url": issue,
		"commits_url": api + "/commits", "review_comments_url": api + "/comments", "review_comment_url": f.apiURL() + "/repos/" + full + "/pulls/comments{/number}",
		"comments_url": issue + "/comments", "statuses_url": statuses,
		"_links": map[string]any{
			"self": link(api), "html": link(html), "issue": link(issue), "comments": link(issue + "/comments"),
			"review_comments": link(api + "/comments"), "review_comment": link(f.apiURL() + "/repos/" + full + "/pulls/comments{/number}"),
			"commits": link(api + "/commits"), "statuses": link(statuses),
		},
	}
}

// headJSON is a pull request's head: in the base repository, or in a fork
// (the fork must be a seeded repository; a deleted one has "repo": null).
func (f *Fake) headJSON(rs *repoState, p *PullRequest, sha string) map[string]any {
	if p.HeadRepo == "" {
		return map[string]any{"ref": p.Head, "sha": sha, "label": rs.Owner + ":" + p.Head, "repo": f.repoJSON(rs), "user": f.userJSON(rs.Owner)}
	}
	fork, ok := f.repos[strings.ToLower(p.HeadRepo)]
	if !ok {
		owner, _, _ := strings.Cut(p.HeadRepo, "/")
		return map[string]any{"ref": p.Head, "sha": sha, "label": owner + ":" + p.Head, "repo": nil, "user": f.userJSON(owner)}
	}
	return map[string]any{"ref": p.Head, "sha": sha, "label": fork.Owner + ":" + p.Head, "repo": f.repoJSON(fork), "user": f.userJSON(fork.Owner)}
}

func (f *Fake) reviewJSON(rs *repoState, rv *Review) map[string]any {
	full := rs.Owner + "/" + rs.Name
	html := fmt.Sprintf("%s/%s/pull/%d#pullrequestreview-%d", f.webURL(), full, rv.PR, rv.ID)
	pr := fmt.Sprintf("%s/repos/%s/pulls/%d", f.apiURL(), full, rv.PR)
	m := map[string]any{
		"id": rv.ID, "node_id": fmt.Sprintf("PRR_fake%d", rv.ID), "user": f.userJSON(rv.User), "body": rv.Body,
		"state": rv.State, "commit_id": rv.CommitID, "author_association": f.association(rs, rv.User),
		"html_url": html, "pull_request_url": pr,
		"_links": map[string]any{"html": link(html), "pull_request": link(pr)},
	}
	if rv.State != "PENDING" {
		m["submitted_at"] = ts(rv.Submitted)
	}
	return m
}

func (f *Fake) reviewCommentJSON(rs *repoState, rc *ReviewComment) map[string]any {
	full := rs.Owner + "/" + rs.Name
	api := fmt.Sprintf("%s/repos/%s/pulls/comments/%d", f.apiURL(), full, rc.ID)
	html := fmt.Sprintf("%s/%s/pull/%d#discussion_r%d", f.webURL(), full, rc.PR, rc.ID)
	pr := fmt.Sprintf("%s/repos/%s/pulls/%d", f.apiURL(), full, rc.PR)
	var review any
	if rc.ReviewID != 0 {
		review = rc.ReviewID
	}
	side := rc.Side
	if side == "" {
		side = "RIGHT"
	}
	var startLine, startSide any
	if rc.StartLine != 0 {
		startLine, startSide = rc.StartLine, rc.StartSide
	}
	return map[string]any{
		"start_line": startLine, "original_start_line": startLine, "start_side": startSide,
		"id": rc.ID, "node_id": fmt.Sprintf("PRRC_fake%d", rc.ID), "user": f.userJSON(rc.User), "body": rc.Body,
		"path": rc.Path, "line": rc.Line, "original_line": rc.Line, "side": side, "commit_id": rc.CommitID, "original_commit_id": rc.CommitID,
		"pull_request_review_id": review, "diff_hunk": fmt.Sprintf("@@ -%d +%d @@", rc.Line, rc.Line),
		"author_association": f.association(rs, rc.User), "created_at": ts(rc.Created), "updated_at": ts(rc.Created),
		"url": api, "html_url": html, "pull_request_url": pr,
		"_links": map[string]any{"self": link(api), "html": link(html), "pull_request": link(pr)},
	}
}

func (f *Fake) refJSON(rs *repoState, name, s string) map[string]any {
	api := f.apiURL() + "/repos/" + rs.Owner + "/" + rs.Name
	return map[string]any{
		"ref": name, "node_id": "REF_fake" + sha(name)[:8], "url": api + "/git/" + name,
		"object": map[string]any{"sha": s, "type": "commit", "url": api + "/git/commits/" + s},
	}
}

// appJSON is an integration (GET /app).
func (f *Fake) appJSON(a *App) map[string]any {
	return map[string]any{
		"id": a.ID, "slug": a.Slug, "name": a.Slug, "node_id": fmt.Sprintf("A_fake%d", a.ID), "client_id": fmt.Sprintf("Iv1.fake%d", a.ID),
		"owner": f.userJSON(a.Owner()), "html_url": f.webURL() + "/apps/" + a.Slug,
		"description": nil, "external_url": f.webURL() + "/apps/" + a.Slug,
		"created_at": created, "updated_at": created,
		"permissions": appPermissions, "events": appEvents,
	}
}

// installationJSON is an installation (GET /repos/{owner}/{repo}/installation).
func (f *Fake) installationJSON(inst int64, a *App, account string) map[string]any {
	acct := f.userOf(account)
	targetType := "User"
	if acct.Type == "Organization" {
		targetType = "Organization"
	}
	return map[string]any{
		"id": inst, "app_id": a.ID, "app_slug": a.Slug, "client_id": fmt.Sprintf("Iv1.fake%d", a.ID),
		"target_id": acct.ID, "target_type": targetType, "account": f.userJSON(account),
		"single_file_name": nil, "repository_selection": "selected",
		"access_tokens_url": fmt.Sprintf("%s/app/installations/%d/access_tokens", f.apiURL(), inst),
		"repositories_url":  f.apiURL() + "/installation/repositories",
		"html_url":          fmt.Sprintf("%s/settings/installations/%d", f.webURL(), inst),
		"events":            appEvents, "permissions": appPermissions,
		"created_at": created, "updated_at": created, "suspended_by": nil, "suspended_at": nil,
	}
}

// The permissions and events the fake's apps hold: what agentos asks for
// (README, "GitHub App").
var (
	appPermissions = map[string]string{"contents": "write", "issues": "write", "pull_requests": "write", "metadata": "read"}
	appEvents      = []string{"issue_comment", "pull_request", "pull_request_review", "pull_request_review_comment"}
)
