package fakegithub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// Label is a repository's label.
type Label struct {
	Name        string
	Color       string // six hex digits, no "#"
	Description string
}

// defaultLabelColor is the colour GitHub gives a label that adding it to
// an issue created.
const defaultLabelColor = "ededed"

// AddLabel seeds a label in repo ("owner/name").
func (f *Fake) AddLabel(repo string, l Label) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rs, ok := f.repos[strings.ToLower(repo)]; ok {
		if l.Color == "" {
			l.Color = defaultLabelColor
		}
		rs.labels[strings.ToLower(l.Name)] = &l
	}
}

// Labels returns the labels of repo, by name.
func (f *Fake) Labels(repo string) []Label {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs, ok := f.repos[strings.ToLower(repo)]
	if !ok {
		return nil
	}
	var out []Label
	for _, l := range rs.labels {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *Fake) labelJSON(rs *repoState, l *Label) map[string]any {
	var desc any
	if l.Description != "" {
		desc = l.Description
	}
	return map[string]any{
		"id": int64(len(l.Name))*1000 + rs.id, "node_id": "LA_fake" + url.PathEscape(l.Name),
		"url":  fmt.Sprintf("%s/repos/%s/%s/labels/%s", f.apiURL(), rs.Owner, rs.Name, url.PathEscape(l.Name)),
		"name": l.Name, "description": desc, "color": l.Color, "default": false,
	}
}

func (f *Fake) issueLabelsJSON(rs *repoState, is *Issue) []any {
	out := []any{}
	for _, n := range is.Labels {
		if l, ok := rs.labels[strings.ToLower(n)]; ok {
			out = append(out, f.labelJSON(rs, l))
		}
	}
	return out
}

// listRepoLabels is GET /repos/{owner}/{repo}/labels.
func listRepoLabels(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	names := make([]string, 0, len(rs.labels))
	for k := range rs.labels {
		names = append(names, k)
	}
	sort.Strings(names)
	out := []any{}
	for _, k := range names {
		out = append(out, c.f.labelJSON(rs, rs.labels[k]))
	}
	c.page(out)
}

// listIssueLabels is GET /repos/{owner}/{repo}/issues/{issue_number}/labels.
func listIssueLabels(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	is := rs.issues[int(c.intParam("issue_number"))]
	if is == nil {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	c.page(c.f.issueLabelsJSON(rs, is))
}

// addIssueLabels is POST /repos/{owner}/{repo}/issues/{issue_number}/labels.
// As on GitHub, a label the repository does not have is created (colour
// ededed, no description) — which is why the bot only ever adds labels it
// found in the repository. It takes triage access or above (or the
// installation), and the body as {"labels": [...]} (names or {"name"}),
// or a bare array of names.
func addIssueLabels(c *call) {
	rs := c.repo()
	if rs == nil {
		return
	}
	if !c.installed(rs) {
		switch c.perm(rs, c.login()) {
		case PermAdmin, PermMaintain, PermWrite, PermTriage:
		default:
			writeError(c.w, http.StatusForbidden, "Resource not accessible by personal access token")
			return
		}
	}
	is := rs.issues[int(c.intParam("issue_number"))]
	if is == nil {
		writeError(c.w, http.StatusNotFound, "Not Found")
		return
	}
	names, ok := labelNames(c.body)
	if !ok || len(names) == 0 {
		writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Label", "field": "labels", "code": "invalid"})
		return
	}
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			writeError(c.w, http.StatusUnprocessableEntity, "Validation Failed", map[string]any{"resource": "Label", "field": "name", "code": "missing_field"})
			return
		}
	}
	for _, n := range names {
		l, ok := rs.labels[strings.ToLower(n)]
		if !ok {
			l = &Label{Name: n, Color: defaultLabelColor}
			rs.labels[strings.ToLower(n)] = l
		}
		has := false
		for _, cur := range is.Labels {
			if strings.EqualFold(cur, l.Name) {
				has = true
			}
		}
		if !has {
			is.Labels = append(is.Labels, l.Name)
		}
	}
	is.Updated = c.f.now()
	c.w.Header().Set("Content-Type", "application/json")
	writeJSON(c.w, http.StatusOK, c.f.issueLabelsJSON(rs, is))
}

// labelNames reads the label names of an add-labels body.
func labelNames(body []byte) ([]string, bool) {
	var obj struct {
		Labels []json.RawMessage `json:"labels"`
	}
	var list []json.RawMessage
	if err := json.Unmarshal(body, &obj); err == nil && obj.Labels != nil {
		list = obj.Labels
	} else if err := json.Unmarshal(body, &list); err != nil {
		return nil, false
	}
	var out []string
	for _, raw := range list {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out = append(out, s)
			continue
		}
		var o struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &o) != nil {
			return nil, false
		}
		out = append(out, o.Name)
	}
	return out, true
}

// revokeInstallationToken is DELETE /installation/token: an installation
// token revokes itself; GitHub answers 204 and refuses the token from then
// on (401 Bad credentials). Any other credential is refused.
func revokeInstallationToken(c *call) {
	if c.id.installation == 0 {
		writeError(c.w, http.StatusForbidden, "This endpoint takes an installation access token")
		return
	}
	_, cred, _ := strings.Cut(c.r.Header.Get("Authorization"), " ")
	delete(c.f.tokens, cred)
	c.w.WriteHeader(http.StatusNoContent)
}
