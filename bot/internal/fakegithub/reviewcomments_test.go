package fakegithub

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// samplePatch changes db.go: line 3 of the old file is removed, lines 3–4
// of the new file are added, lines 1–2 and 5 (old 4) are context; a second
// hunk adds line 20.
const samplePatch = "@@ -1,4 +1,5 @@\n package db\n \n-var q = \"x\"\n+func Find(name string) string {\n+\treturn \"SELECT * FROM users WHERE name = '\" + name + \"'\"\n }\n@@ -17,2 +18,3 @@ func other() {\n \ta()\n+\tb()\n }\n"

func diffPR(t *testing.T) (*Fake, string, int) {
	t.Helper()
	f, url := seeded(t)
	f.SetRef("octo/app", "heads/sqli", sha("sqli"))
	n := f.AddPullRequest("octo/app", PullRequest{Title: "find users", User: "dev", Head: "sqli", Base: "main", Files: []PRFile{
		{Path: "db.go", Patch: samplePatch},
		{Path: "new.go", Status: "added", Patch: "@@ -0,0 +1,2 @@\n+package db\n+var x = 1\n"},
	}})
	return f, url, n
}

func TestReviewCommentsFollowTheHunks(t *testing.T) {
	f, url, n := diffPR(t)
	c := client{t: t, url: url, token: ownerTok}
	tests := []struct {
		name    string
		comment map[string]any
		want    int
		msg     string
	}{
		{"added line, RIGHT", map[string]any{"path": "db.go", "line": 4, "side": "RIGHT"}, 200, ""},
		{"side defaults to RIGHT", map[string]any{"path": "db.go", "line": 3}, 200, ""},
		{"context line, RIGHT", map[string]any{"path": "db.go", "line": 5, "side": "RIGHT"}, 200, ""},
		{"removed line, LEFT", map[string]any{"path": "db.go", "line": 3, "side": "LEFT"}, 200, ""},
		{"context line, LEFT", map[string]any{"path": "db.go", "line": 4, "side": "LEFT"}, 200, ""},
		{"second hunk", map[string]any{"path": "db.go", "line": 19}, 200, ""},
		{"range in one hunk", map[string]any{"path": "db.go", "start_line": 3, "line": 4, "side": "RIGHT"}, 200, ""},
		{"removed line on RIGHT", map[string]any{"path": "db.go", "line": 7, "side": "RIGHT"}, 422, msgLineNotInDiff},
		{"between hunks", map[string]any{"path": "db.go", "line": 10}, 422, msgLineNotInDiff},
		{"LEFT line not shown", map[string]any{"path": "db.go", "line": 10, "side": "LEFT"}, 422, msgLineNotInDiff},
		{"range over two hunks", map[string]any{"path": "db.go", "start_line": 4, "line": 19}, 422, msgStartOtherHunk},
		{"range backwards", map[string]any{"path": "db.go", "start_line": 4, "line": 3}, 422, msgStartAfterLine},
		{"path not in the PR", map[string]any{"path": "main.go", "line": 1}, 422, msgPathNotResolved},
		{"bad side", map[string]any{"path": "db.go", "line": 4, "side": "MIDDLE"}, 422, msgBadSide},
		{"added file", map[string]any{"path": "new.go", "line": 2}, 200, ""},
		{"added file has no LEFT", map[string]any{"path": "new.go", "line": 1, "side": "LEFT"}, 422, msgLineNotInDiff},
	}
	ok := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := map[string]any{"body": "finding"}
			for k, v := range tt.comment {
				cm[k] = v
			}
			status, body, _ := c.do("POST", fmt.Sprintf("/repos/octo/app/pulls/%d/reviews", n), map[string]any{
				"event": "COMMENT", "body": "review", "comments": []any{cm},
			})
			if status != tt.want {
				t.Fatalf("status = %d, want %d (%v)", status, tt.want, body)
			}
			if status == 200 {
				ok++
				return
			}
			if body["message"] != "Unprocessable Entity" || fmt.Sprint(body["errors"]) != "["+tt.msg+"]" {
				t.Errorf("error = %v, want message Unprocessable Entity and errors [%s]", body, tt.msg)
			}
		})
	}
	if got := len(f.Reviews("octo/app", n)); got != ok {
		t.Errorf("reviews = %d, want %d (a refused review leaves nothing)", got, ok)
	}
	f.CheckNoViolations(t)
}

func TestReviewIsAllOrNothing(t *testing.T) {
	f, url, n := diffPR(t)
	c := client{t: t, url: url, token: ownerTok}
	status, _, _ := c.do("POST", fmt.Sprintf("/repos/octo/app/pulls/%d/reviews", n), map[string]any{
		"event": "COMMENT", "body": "review", "comments": []any{
			map[string]any{"path": "db.go", "line": 4, "body": "fine"},
			map[string]any{"path": "db.go", "line": 12, "body": "outside"},
		},
	})
	if status != 422 {
		t.Fatalf("status = %d, want 422", status)
	}
	if len(f.Reviews("octo/app", n)) != 0 || len(f.ReviewComments("octo/app", n)) != 0 {
		t.Errorf("a refused review left state: %v %v", f.Reviews("octo/app", n), f.ReviewComments("octo/app", n))
	}
	status, _, _ = c.do("POST", fmt.Sprintf("/repos/octo/app/pulls/%d/reviews", n), map[string]any{
		"event": "COMMENT", "body": "review", "comments": []any{
			map[string]any{"path": "db.go", "line": 4, "start_line": 3, "body": "range"},
			map[string]any{"path": "db.go", "line": 3, "side": "LEFT", "body": "removed"},
		},
	})
	if status != 200 {
		t.Fatalf("status = %d, want 200", status)
	}
	// The listing endpoint shows what was stored, with start_line.
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/repos/octo/app/pulls/%d/comments", url, n), nil)
	req.Header.Set("Authorization", "token "+ownerTok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`"start_line":3`, `"line":4`, `"side":"LEFT"`, `"start_side":"RIGHT"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("listed comments lack %s: %s", want, raw)
		}
	}
	got := f.ReviewComments("octo/app", n)
	if len(got) != 2 || got[0].StartLine != 3 || got[0].Side != "RIGHT" || got[1].Side != "LEFT" {
		t.Errorf("stored comments = %+v", got)
	}
	f.CheckNoViolations(t)
}

func TestSingleReviewCommentOutsideTheDiff(t *testing.T) {
	f, url, n := diffPR(t)
	c := client{t: t, url: url, token: ownerTok}
	status, body, _ := c.do("POST", fmt.Sprintf("/repos/octo/app/pulls/%d/comments", n), map[string]any{
		"body": "x", "commit_id": sha("sqli"), "path": "db.go", "line": 12, "side": "RIGHT",
	})
	if status != 422 || body["message"] != "Validation Failed" || !strings.Contains(fmt.Sprint(body["errors"]), "pull_request_review_thread.line") || !strings.Contains(fmt.Sprint(body["errors"]), "could not be resolved") {
		t.Errorf("status %d, body %v; want 422 with pull_request_review_thread.line could not be resolved", status, body)
	}
	f.CheckNoViolations(t)
}

func TestPRDiffAndFiles(t *testing.T) {
	f, url, n := diffPR(t)
	get := func(path, accept string) (int, string, string) {
		req, _ := http.NewRequest("GET", url+path, nil)
		req.Header.Set("Authorization", "token "+ownerTok)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(raw)
	}
	status, ct, body := get(fmt.Sprintf("/repos/octo/app/pulls/%d", n), "application/vnd.github.diff")
	if status != 200 || !strings.HasPrefix(ct, "application/vnd.github.diff") {
		t.Fatalf("diff: %d %s", status, ct)
	}
	for _, want := range []string{"diff --git a/db.go b/db.go\n--- a/db.go\n+++ b/db.go\n@@ -1,4 +1,5 @@", "diff --git a/new.go b/new.go\nnew file mode 100644\n--- /dev/null\n+++ b/new.go\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("diff lacks %q:\n%s", want, body)
		}
	}
	status, _, body = get(fmt.Sprintf("/repos/octo/app/pulls/%d/files?per_page=1", n), "")
	if status != 200 || !strings.Contains(body, `"filename":"db.go"`) || strings.Contains(body, "new.go") || !strings.Contains(body, `"additions":3`) {
		t.Errorf("files page 1: %d %s", status, body)
	}
	status, _, body = get(fmt.Sprintf("/repos/octo/app/pulls/%d/files?per_page=1&page=2", n), "")
	if status != 200 || !strings.Contains(body, `"status":"added"`) {
		t.Errorf("files page 2: %d %s", status, body)
	}
	// A PR seeded without a diff has none to give.
	if status, _, _ := get("/repos/octo/app/pulls/1", "application/vnd.github.diff"); status != 406 {
		t.Errorf("diff of a PR without files: %d, want 406", status)
	}
	f.CheckNoViolations(t)
}

func TestAddLabelsCreatesMissingOnes(t *testing.T) {
	f, url := seeded(t)
	f.AddLabel("octo/app", Label{Name: "bug", Color: "d73a4a", Description: "Something is broken"})
	c := client{t: t, url: url, token: readTok}
	if status, _, _ := c.do("POST", "/repos/octo/app/issues/2/labels", map[string]any{"labels": []string{"bug"}}); status != 403 {
		t.Errorf("a reader adding labels: %d, want 403", status)
	}
	c.token = devTok
	status, _, _ := c.do("POST", "/repos/octo/app/issues/2/labels", map[string]any{"labels": []any{"bug", map[string]any{"name": "brand-new"}}})
	if status != 200 {
		t.Fatalf("add labels: %d", status)
	}
	is, _ := f.Issue("octo/app", 2)
	if strings.Join(is.Labels, ",") != "bug,brand-new" {
		t.Errorf("issue labels = %v", is.Labels)
	}
	ls := f.Labels("octo/app")
	if len(ls) != 2 || ls[0].Name != "brand-new" || ls[0].Color != "ededed" {
		t.Errorf("repo labels = %+v; want brand-new created with colour ededed", ls)
	}
	f.CheckNoViolations(t)
}

func TestRevokedInstallationTokenIsRefused(t *testing.T) {
	f, url := seeded(t)
	app, _, err := NewApp(7, "agentos")
	if err != nil {
		t.Fatal(err)
	}
	f.AddApp(app)
	f.AddInstallation(70, 7, "octo/app")
	f.AddInstallationToken("ghs_run", 70)
	c := client{t: t, url: url, token: "ghs_run"}
	if status, _, _ := c.do("GET", "/repos/octo/app", nil); status != 200 {
		t.Fatalf("before revoking: %d", status)
	}
	if status, _, _ := c.do("DELETE", "/installation/token", nil); status != 204 {
		t.Fatalf("revoke: %d, want 204", status)
	}
	if status, _, _ := c.do("GET", "/repos/octo/app", nil); status != 401 {
		t.Errorf("after revoking: %d, want 401", status)
	}
	c.token = ownerTok
	if status, _, _ := c.do("DELETE", "/installation/token", nil); status != 403 {
		t.Errorf("a user token revoking: %d, want 403", status)
	}
	f.CheckNoViolations(t)
}
