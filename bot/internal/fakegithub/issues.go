package fakegithub

import (
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"
)

// maxTitleChars is GitHub's limit on an issue title.
const maxTitleChars = 256

// Issues returns copies of repo's issues (not pull requests), by number.
func (f *Fake) Issues(repo string) []Issue {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs, ok := f.repos[strings.ToLower(repo)]
	if !ok {
		return nil
	}
	var out []Issue
	for _, is := range rs.issues {
		if !is.IsPR {
			c := *is
			c.Labels = append([]string(nil), is.Labels...)
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// createIssue is POST /repos/{owner}/{repo}/issues, with GitHub's rules:
//   - anyone who can see the repository may open an issue (an installation
//     token only on its installation's repositories);
//   - a repository with issues turned off answers 410 Gone;
//   - title is required (a string or a number), 422 missing_field
//     otherwise, and at most 256 characters; the body at most 65,536;
//   - labels are set only by callers with push access and silently
//     dropped for anyone else; a label the repository lacks is created
//     (colour ededed), as when labels are added to an issue.
//
// The new issue is delivered as an issues "opened" webhook.
func createIssue(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	if rs.NoIssues {
		writeError(c.w, http.StatusGone, "Issues are disabled for this repo")
		return
	}
	var in struct {
		Title  json.RawMessage   `json:"title"`
		Body   *string           `json:"body"`
		Labels []json.RawMessage `json:"labels"`
	}
	if !c.decode(&in) {
		return
	}
	title, ok := titleOf(in.Title)
	if !ok {
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Issue", "field": "title", "code": "invalid"})
		return
	}
	if strings.TrimSpace(title) == "" {
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Issue", "field": "title", "code": "missing_field"})
		return
	}
	if len([]rune(title)) > maxTitleChars {
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Issue", "field": "title", "code": "custom", "message": "title is too long (maximum is 256 characters)"})
		return
	}
	body := ""
	if in.Body != nil {
		body = *in.Body
	}
	if tooLong(c.w, "Issue", "body", body) {
		return
	}
	var labels []string
	if len(in.Labels) > 0 {
		raw, _ := json.Marshal(in.Labels)
		names, ok := labelNames(raw)
		if !ok {
			writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Issue", "field": "labels", "code": "invalid"})
			return
		}
		for _, n := range names {
			if strings.TrimSpace(n) == "" {
				writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Label", "field": "name", "code": "missing_field"})
				return
			}
		}
		if c.pushAccess(rs) {
			labels = names
		}
	}
	now := c.f.now()
	is := &Issue{Number: rs.nextNumber, Title: title, Body: body, User: c.login(), State: "open", Created: now, Updated: now}
	rs.nextNumber++
	for _, n := range labels {
		l, ok := rs.labels[strings.ToLower(n)]
		if !ok {
			l = &Label{Name: n, Color: defaultLabelColor}
			rs.labels[strings.ToLower(n)] = l
		}
		if !hasLabel(is.Labels, l.Name) {
			is.Labels = append(is.Labels, l.Name)
		}
	}
	rs.issues[is.Number] = is
	j := c.f.issueJSON(rs, is)
	c.w.Header().Set("Location", j["url"].(string))
	writeJSON(c.w, http.StatusCreated, j)
	c.f.deliver(rs, "issues", c.login(), map[string]any{"action": "opened", "issue": c.f.issueJSON(rs, is)})
}

// pushAccess reports whether the caller may push (its installation, or
// write access and above), without answering.
func (c *call) pushAccess(rs *repoState) bool {
	if c.installed(rs) {
		return true
	}
	switch c.perm(rs, c.login()) {
	case PermAdmin, PermMaintain, PermWrite:
		return true
	}
	return false
}

// titleOf reads an issue title: GitHub takes a string or a number.
func titleOf(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String(), true
	}
	return "", false
}

func hasLabel(labels []string, name string) bool {
	for _, l := range labels {
		if strings.EqualFold(l, name) {
			return true
		}
	}
	return false
}

// listIssues is GET /repos/{owner}/{repo}/issues. As on GitHub the list
// holds pull requests too (with a pull_request key); it filters by state
// (open by default, closed, all), creator, labels (comma-separated, all
// required) and since (updated at or after, ISO 8601), and sorts by
// created (default), updated or comments, desc by default. A value
// outside those is 422.
func listIssues(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	q := c.r.URL.Query()
	bad := func(field string) {
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Issue", "field": field, "code": "invalid"})
	}
	state := q.Get("state")
	switch state {
	case "":
		state = "open"
	case "open", "closed", "all":
	default:
		bad("state")
		return
	}
	by := q.Get("sort")
	switch by {
	case "":
		by = "created"
	case "created", "updated", "comments":
	default:
		bad("sort")
		return
	}
	dir := q.Get("direction")
	switch dir {
	case "":
		dir = "desc"
	case "asc", "desc":
	default:
		bad("direction")
		return
	}
	var since time.Time
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			bad("since")
			return
		}
		since = t
	}
	var want []string
	if l := q.Get("labels"); l != "" {
		for _, n := range strings.Split(l, ",") {
			if n = strings.TrimSpace(n); n != "" {
				want = append(want, n)
			}
		}
	}
	creator := q.Get("creator")
	var list []*Issue
	for _, is := range rs.issues {
		if state != "all" && is.State != state {
			continue
		}
		if creator != "" && !strings.EqualFold(is.User, creator) {
			continue
		}
		if !since.IsZero() && is.Updated.Before(since) {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && hasLabel(is.Labels, w)
		}
		if ok {
			list = append(list, is)
		}
	}
	comments := map[int]int{}
	if by == "comments" {
		for id, cm := range c.f.comments {
			if c.f.commentRepo[id] == key(rs.Owner, rs.Name) {
				comments[cm.Issue]++
			}
		}
	}
	less := func(a, b *Issue) bool {
		switch by {
		case "updated":
			return a.Updated.Before(b.Updated) || a.Updated.Equal(b.Updated) && a.Number < b.Number
		case "comments":
			return comments[a.Number] < comments[b.Number] || comments[a.Number] == comments[b.Number] && a.Number < b.Number
		}
		return a.Created.Before(b.Created) || a.Created.Equal(b.Created) && a.Number < b.Number
	}
	sort.Slice(list, func(i, j int) bool {
		if dir == "desc" {
			return less(list[j], list[i])
		}
		return less(list[i], list[j])
	})
	out := make([]any, 0, len(list))
	for _, is := range list {
		out = append(out, c.f.issueJSON(rs, is))
	}
	c.page(out)
}
