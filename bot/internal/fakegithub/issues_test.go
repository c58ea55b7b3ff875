package fakegithub

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Opening an issue follows GitHub's rules: a title is required, labels
// count only from callers with push access (and are created when the
// repository lacks them), a repository without issues answers 410, and
// the new issue is delivered as an issues "opened" webhook.
func TestCreateIssue(t *testing.T) {
	f, url := seeded(t)
	f.AddLabel("octo/app", Label{Name: "bug", Color: "d73a4a"})
	f.AddRepo(Repo{Owner: "octo", Name: "quiet", NoIssues: true})
	tests := []struct {
		name, token, path string
		body              any
		wantStatus        int
		wantInBody        string
	}{
		{"blank title", devTok, "/repos/octo/app/issues", map[string]any{"title": "  "}, 422, `"field":"title"`},
		{"title too long", devTok, "/repos/octo/app/issues", map[string]any{"title": strings.Repeat("t", 257)}, 422, "too long"},
		{"body too long", devTok, "/repos/octo/app/issues", map[string]any{"title": "t", "body": strings.Repeat("x", MaxBodyChars+1)}, 422, "too long"},
		{"issues off", devTok, "/repos/octo/quiet/issues", map[string]any{"title": "t"}, 410, "disabled"},
		{"numeric title", devTok, "/repos/octo/app/issues", map[string]any{"title": 42}, 201, `"title":"42"`},
		{"writer's labels", devTok, "/repos/octo/app/issues", map[string]any{"title": "w", "labels": []any{"bug", map[string]any{"name": "nightly"}}}, 201, `"name":"nightly"`},
		{"reader's labels dropped", readTok, "/repos/octo/app/issues", map[string]any{"title": "r", "labels": []string{"bug", "spam"}}, 201, `"labels":[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, m, h := client{t: t, url: url, token: tt.token}.do("POST", tt.path, tt.body)
			raw, _ := json.Marshal(m)
			if status != tt.wantStatus || !strings.Contains(string(raw), tt.wantInBody) {
				t.Errorf("POST %s = %d %s, want %d containing %q", tt.path, status, trunc(raw), tt.wantStatus, tt.wantInBody)
			}
			if status == 201 && h.Get("Location") != m["url"] {
				t.Errorf("Location = %q, url = %v", h.Get("Location"), m["url"])
			}
		})
	}
	f.CheckNoViolations(t)
	var titles []string
	for _, is := range f.Issues("octo/app") {
		titles = append(titles, is.Title+":"+is.User+":"+strings.Join(is.Labels, "+"))
	}
	// #1 is the seeded PR (not listed), #2 the seeded issue.
	if got, want := strings.Join(titles, ","), "bug:reader:,42:dev:,w:dev:bug+nightly,r:reader:"; got != want {
		t.Errorf("issues = %s, want %s", got, want)
	}
	var names []string
	for _, l := range f.Labels("octo/app") {
		names = append(names, l.Name+"/"+l.Color)
	}
	if got := strings.Join(names, ","); got != "bug/d73a4a,nightly/ededed" {
		t.Errorf("labels = %s; want bug kept and nightly created, spam not", got)
	}
	opened := 0
	for _, d := range f.Deliveries() {
		if d.Event == "issues" && strings.Contains(string(d.Body), `"action":"opened"`) {
			opened++
		}
	}
	if opened != 3 {
		t.Errorf("issues opened deliveries = %d, want 3", opened)
	}
}

// The issue list is GitHub's: pull requests included, open only by
// default, newest first, filtered by creator and labels, paged; a value
// outside an enum is 422.
func TestListIssues(t *testing.T) {
	f, url := seeded(t)
	f.AddLabel("octo/app", Label{Name: "bug"})
	c := client{t: t, url: url, token: devTok}
	for _, title := range []string{"a", "b", "c"} {
		if st, _, _ := c.do("POST", "/repos/octo/app/issues", map[string]any{"title": title, "labels": []string{"bug"}}); st != 201 {
			t.Fatalf("create %s: %d", title, st)
		}
	}
	list := func(q string) (int, []string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", url+"/repos/octo/app/issues"+q, nil)
		req.Header.Set("Authorization", "token "+devTok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var items []struct {
			Title       string          `json:"title"`
			PullRequest json.RawMessage `json:"pull_request"`
		}
		_ = json.Unmarshal(raw, &items)
		var out []string
		for _, it := range items {
			s := it.Title
			if it.PullRequest != nil {
				s += "(pr)"
			}
			out = append(out, s)
		}
		return resp.StatusCode, out, resp.Header
	}
	cases := []struct {
		query, want string
		status      int
	}{
		{"", "c,b,a,bug,t(pr)", 200},
		{"?direction=asc", "t(pr),bug,a,b,c", 200},
		{"?creator=DEV", "c,b,a,t(pr)", 200},
		{"?labels=bug", "c,b,a", 200},
		{"?state=closed", "", 200},
		{"?state=all&per_page=2", "c,b", 200},
		{"?state=everything", "", 422},
		{"?sort=stars", "", 422},
		{"?since=yesterday", "", 422},
	}
	for _, cs := range cases {
		st, got, h := list(cs.query)
		if st != cs.status || strings.Join(got, ",") != cs.want {
			t.Errorf("GET issues%s = %d %v, want %d %s", cs.query, st, got, cs.status, cs.want)
		}
		if cs.query == "?state=all&per_page=2" && !strings.Contains(h.Get("Link"), `rel="next"`) {
			t.Errorf("no next link: %q", h.Get("Link"))
		}
	}
	f.CheckNoViolations(t)
}
