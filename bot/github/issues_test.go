package github

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/internal/fakegithub"
	gh "github.com/google/go-github/v62/github"
)

func TestCreateAndFindIssue(t *testing.T) {
	f, base := seeded(t)
	c := tokenClient(t, base, botTok, RetryPolicy{})
	ctx := context.Background()

	for _, bad := range []NewIssue{{Title: " "}, {Title: strings.Repeat("t", MaxTitleChars+1)}, {Title: "t", Body: strings.Repeat("b", MaxBodyChars+1)}} {
		f.ResetCalls()
		if _, err := c.CreateIssue(ctx, "octo", "app", bad); !errors.Is(err, ErrValidation) {
			t.Errorf("CreateIssue(%.20q) = %v, want ErrValidation", bad.Title, err)
		}
		if n := f.Calls()["POST /repos/{owner}/{repo}/issues"]; n != 0 {
			t.Errorf("a bad issue reached GitHub (%d calls)", n)
		}
	}
	// A reader opens an issue with the marker too: FindIssue keeps only
	// the creator's.
	reader := tokenClient(t, base, readerTok, RetryPolicy{})
	if _, err := reader.CreateIssue(ctx, "octo", "app", NewIssue{Title: "forged", Body: "<!-- mark 7 -->"}); err != nil {
		t.Fatal(err)
	}
	is, err := c.CreateIssue(ctx, "octo", "app", NewIssue{Title: "nightly", Body: "work\n<!-- mark 7 -->", Labels: []string{"nightly"}})
	if err != nil || is.GetNumber() == 0 || is.GetUser().GetLogin() != "agentos-bot" || len(is.Labels) != 1 {
		t.Fatalf("CreateIssue = %+v, %v", is, err)
	}
	for i := 0; i < 3; i++ { // newer issues to walk past, one page each
		if _, err := c.CreateIssue(ctx, "octo", "app", NewIssue{Title: "other"}); err != nil {
			t.Fatal(err)
		}
	}
	has := func(s string) func(*gh.Issue) bool {
		return func(i *gh.Issue) bool { return strings.Contains(i.GetBody(), s) }
	}
	found, truncated, err := c.FindIssue(ctx, "octo", "app", IssueQuery{Creator: "AGENTOS-BOT"}, has("<!-- mark 7 -->"))
	if err != nil || truncated || found.GetNumber() != is.GetNumber() {
		t.Fatalf("FindIssue = %v, %v, %v; want #%d", found.GetNumber(), truncated, err, is.GetNumber())
	}
	if found, truncated, err := c.FindIssue(ctx, "octo", "app", IssueQuery{Creator: "agentos-bot"}, has("<!-- mark 8 -->")); found != nil || truncated || err != nil {
		t.Errorf("FindIssue of a missing marker = %v, %v, %v", found, truncated, err)
	}
	// Bounded walks: by creation time and by pages.
	if found, truncated, _ := c.FindIssue(ctx, "octo", "app", IssueQuery{CreatedAfter: time.Now().Add(time.Hour)}, has("mark 7")); found != nil || truncated {
		t.Errorf("CreatedAfter in the future found %v (truncated %v)", found, truncated)
	}
	for i := 0; i < 200; i++ {
		f.AddIssue("octo/app", fakegithub.Issue{Title: "newer", User: "agentos-bot"})
	}
	f.ResetCalls()
	found, truncated, err = c.FindIssue(ctx, "octo", "app", IssueQuery{MaxPages: 2}, has("mark 7"))
	if found != nil || !truncated || err != nil {
		t.Errorf("a walk cut at 2 pages = %v, %v, %v; want truncated", found, truncated, err)
	}
	if n := f.Calls()["GET /repos/{owner}/{repo}/issues"]; n != 2 {
		t.Errorf("the walk read %d pages, want 2", n)
	}
	f.CheckNoViolations(t)
}
