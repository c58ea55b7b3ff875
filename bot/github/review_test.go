package github

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/fakegithub"
)

// dbPatch: old line 3 removed; new lines 3–4 added; 1–2 and new 5 (old 4)
// context; a second hunk shows new 18–20 with 19 added.
const dbPatch = "@@ -1,4 +1,5 @@\n package db\n \n-var q = \"x\"\n+func Find(name string) string {\n+\treturn \"SELECT\" + name\n }\n@@ -17,2 +18,3 @@ func other() {\n \ta()\n+\tb()\n }\n"

func TestDiffMapPlace(t *testing.T) {
	m, err := NewDiffMap([]PRFile{
		{Path: "db.go", Status: "modified", Patch: dbPatch},
		{Path: "gone.go", Status: "removed", Patch: "@@ -1,2 +0,0 @@\n-package gone\n-var x = 1\n"},
		{Path: "logo.png", Status: "added"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		path      string
		line, end int
		want      LineComment
		ok        bool
	}{
		{"added line", "db.go", 4, 0, LineComment{Path: "db.go", Line: 4, Side: "RIGHT"}, true},
		{"context line", "db.go", 1, 0, LineComment{Path: "db.go", Line: 1, Side: "RIGHT"}, true},
		{"range in one hunk", "db.go", 3, 4, LineComment{Path: "db.go", Line: 4, Side: "RIGHT", StartLine: 3, StartSide: "RIGHT"}, true},
		{"range running out of the hunk", "db.go", 4, 9, LineComment{Path: "db.go", Line: 5, Side: "RIGHT", StartLine: 4, StartSide: "RIGHT"}, true},
		{"range starting before the hunk", "db.go", 15, 18, LineComment{Path: "db.go", Line: 18, Side: "RIGHT"}, true},
		{"range across both hunks keeps the first", "db.go", 5, 19, LineComment{Path: "db.go", Line: 5, Side: "RIGHT"}, true},
		{"between hunks", "db.go", 10, 0, LineComment{}, false},
		{"end before line is one line", "db.go", 19, 2, LineComment{Path: "db.go", Line: 19, Side: "RIGHT"}, true},
		{"removed file is LEFT", "gone.go", 2, 0, LineComment{Path: "gone.go", Line: 2, Side: "LEFT"}, true},
		{"binary file has no lines", "logo.png", 1, 0, LineComment{}, false},
		{"file not in the PR", "main.go", 1, 0, LineComment{}, false},
		{"no line", "db.go", 0, 0, LineComment{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := m.Place(tt.path, tt.line, tt.end)
			if ok != tt.ok || got != tt.want {
				t.Errorf("Place(%s, %d, %d) = %+v, %v; want %+v, %v", tt.path, tt.line, tt.end, got, ok, tt.want, tt.ok)
			}
		})
	}
	if !m.Has("logo.png") || m.Has("main.go") {
		t.Error("Has: logo.png is in the PR, main.go is not")
	}
	if _, err := NewDiffMap([]PRFile{{Path: "x", Patch: "+no header\n"}}); err == nil {
		t.Error("a patch without a hunk header was accepted")
	}
	if _, err := NewDiffMap([]PRFile{{Path: "x", Patch: "@@ -a +1 @@\n+x\n"}}); err == nil {
		t.Error("a bad hunk header was accepted")
	}
}

func diffPR(t *testing.T, files int) (*fakegithub.Fake, *Client, int) {
	t.Helper()
	f, base := seeded(t)
	fs := []fakegithub.PRFile{{Path: "db.go", Patch: dbPatch}}
	for i := 1; i < files; i++ {
		fs = append(fs, fakegithub.PRFile{Path: fmt.Sprintf("gen/f%03d.go", i), Status: "added", Patch: "@@ -0,0 +1 @@\n+package gen\n"})
	}
	n := f.AddPullRequest("octo/app", fakegithub.PullRequest{Title: "find", User: "alice", Head: "work", Base: "main", Files: fs})
	return f, tokenClient(t, base, botTok, RetryPolicy{}), n
}

// The files of a large PR come in pages of 100; the comments a DiffMap
// placed are accepted by GitHub's rules in one POST.
func TestReviewWithLineComments(t *testing.T) {
	f, c, n := diffPR(t, 150)
	ctx := context.Background()
	files, err := c.ListPRFiles(ctx, Repo{Owner: "octo", Name: "app"}, n)
	if err != nil || len(files) != 150 || files[0].Path != "db.go" || files[0].Patch != dbPatch || files[149].Status != "added" {
		t.Fatalf("ListPRFiles = %d files, %v", len(files), err)
	}
	if got := f.Calls()["GET /repos/{owner}/{repo}/pulls/{pull_number}/files"]; got != 2 {
		t.Errorf("file pages fetched = %d, want 2 (150 files, 100 a page)", got)
	}
	m, err := NewDiffMap(files)
	if err != nil {
		t.Fatal(err)
	}
	sqli, _ := m.Place("db.go", 4, 0)
	rng, _ := m.Place("db.go", 3, 4)
	sqli.Body, rng.Body = "SQL injection", "range"
	f.ResetCalls()
	rv, err := c.CreateReviewWithComments(ctx, Repo{Owner: "octo", Name: "app"}, n, NewReview{Body: "review", Comments: []LineComment{sqli, rng}})
	if err != nil {
		t.Fatal(err)
	}
	if calls := f.Calls(); calls["POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews"] != 1 || len(calls) != 1 {
		t.Errorf("calls = %v, want one POST", calls)
	}
	if st := f.Reviews("octo/app", n); len(st) != 1 || st[0].ID != rv || st[0].State != "COMMENTED" {
		t.Errorf("reviews = %+v, want one COMMENTED review with id %d", st, rv)
	}
	got := f.ReviewComments("octo/app", n)
	if len(got) != 2 || got[0].Line != 4 || got[0].Side != "RIGHT" || got[1].StartLine != 3 || got[1].Line != 4 {
		t.Errorf("stored = %+v", got)
	}
	// A line GitHub cannot place fails the whole review, typed.
	_, err = c.CreateReviewWithComments(ctx, Repo{Owner: "octo", Name: "app"}, n, NewReview{Body: "again", Comments: []LineComment{{Path: "db.go", Line: 10, Body: "x"}}})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 422 || !strings.Contains(err.Error(), "must be part of the diff") {
		t.Errorf("err = %v, want a 422 APIError naming the diff", err)
	}
	if len(f.Reviews("octo/app", n)) != 1 {
		t.Errorf("reviews = %d, want 1", len(f.Reviews("octo/app", n)))
	}
	// Refused before any request.
	for _, r := range []NewReview{
		{Event: "MERGE", Body: "x"},
		{Body: ""},
		{Body: "x", Comments: []LineComment{{Path: "db.go", Line: 0, Body: "x"}}},
		{Body: "x", Comments: []LineComment{{Path: "db.go", Line: 3, StartLine: 4, Body: "x"}}},
	} {
		if _, err := c.CreateReviewWithComments(ctx, Repo{Owner: "octo", Name: "app"}, n, r); !errors.Is(err, ErrValidation) || (err != nil && err.(*APIError).Status != 0) {
			t.Errorf("CreateReviewWithComments(%+v) = %v, want a validation error before any request", r, err)
		}
	}
	diff, err := c.PullRequestDiff(ctx, Repo{Owner: "octo", Name: "app"}, n)
	if err != nil || !strings.Contains(diff, "diff --git a/db.go b/db.go") || !strings.Contains(diff, "+++ b/gen/f149.go") {
		t.Errorf("PullRequestDiff = %.200q, %v", diff, err)
	}
	f.CheckNoViolations(t)
}

func TestLabels(t *testing.T) {
	f, base := seeded(t)
	f.AddLabel("octo/app", fakegithub.Label{Name: "bug"})
	f.AddLabel("octo/app", fakegithub.Label{Name: "needs-triage"})
	c := tokenClient(t, base, botTok, RetryPolicy{})
	ctx := context.Background()
	names, err := c.RepoLabels(ctx, Repo{Owner: "octo", Name: "app"})
	if err != nil || strings.Join(names, ",") != "bug,needs-triage" {
		t.Fatalf("RepoLabels = %v, %v", names, err)
	}
	if err := c.AddLabels(ctx, Repo{Owner: "octo", Name: "app"}, 1, []string{"bug"}); err != nil {
		t.Fatal(err)
	}
	if is, _ := f.Issue("octo/app", 1); strings.Join(is.Labels, ",") != "bug" {
		t.Errorf("labels = %v", is.Labels)
	}
	if err := c.AddLabels(ctx, Repo{Owner: "octo", Name: "app"}, 1, nil); !errors.Is(err, ErrValidation) || (err != nil && err.(*APIError).Status != 0) {
		t.Errorf("AddLabels(nil) = %v, want a validation error before any request", err)
	}
	f.CheckNoViolations(t)
}

// An App client revokes the installation tokens it minted, and only
// those; GitHub refuses a revoked token, and the next call mints anew.
func TestRevokeMintedTokens(t *testing.T) {
	f, c := appClient(t)
	ctx := context.Background()
	if n, err := c.RevokeMintedTokens(ctx); n != 0 || err != nil {
		t.Fatalf("before any call: %d, %v; want nothing to revoke", n, err)
	}
	c.RememberInstallation("octo", "app", 9001)
	tok, err := c.GitTokenFor(ctx, "octo", "app")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.RevokeMintedTokens(ctx); n != 1 || err != nil {
		t.Fatalf("RevokeMintedTokens = %d, %v; want 1", n, err)
	}
	if f.Calls()["DELETE /installation/token"] != 1 {
		t.Errorf("calls = %v", f.Calls())
	}
	old := tokenClient(t, c.GitHub().BaseURL.String(), tok, RetryPolicy{})
	var apiErr *APIError
	if _, err := old.Issue(ctx, Repo{Owner: "octo", Name: "app"}, 1); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Errorf("the revoked token still works: %v", err)
	}
	if _, err := c.CreateComment(ctx, Repo{Owner: "octo", Name: "app"}, 1, "after"); err != nil {
		t.Fatalf("a call after revoking should mint a new token: %v", err)
	}
	if f.Calls()["POST /app/installations/{installation_id}/access_tokens"] != 2 {
		t.Errorf("tokens minted = %d, want 2", f.Calls()["POST /app/installations/{installation_id}/access_tokens"])
	}
	// Token mode: the configured token is not the client's to revoke.
	_, base := seeded(t)
	if n, err := tokenClient(t, base, botTok, RetryPolicy{}).RevokeMintedTokens(ctx); n != 0 || err != nil {
		t.Errorf("token mode: %d, %v", n, err)
	}
	f.CheckNoViolations(t)
}
