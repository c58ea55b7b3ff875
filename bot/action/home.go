package action

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/untrusted"
	gh "github.com/google/go-github/v62/github"
)

// A home issue is where a run that no issue started (schedule,
// workflow_dispatch) lives: its tracking comment, its draft pull request's
// "Fixes #N", the maintainers' answers. One workflow run has one home
// issue, named by a hidden marker with GITHUB_RUN_ID on the body's last
// line, so a re-run attempt (same GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT > 1)
// or a retried step finds it instead of opening another.

const (
	// homeTitleChars caps a home issue's title (GitHub's limit is 256).
	homeTitleChars = 100
	// homeRerunWindow bounds the search for an earlier attempt's home
	// issue: GitHub re-runs a workflow run only within 30 days of it.
	homeRerunWindow = 31 * 24 * time.Hour
	// homePromptBytes caps the prompt quoted in the body, well inside
	// GitHub's 65,536 characters.
	homePromptBytes = 32 << 10
)

// homeMarker is the last line of a home issue's body.
func homeMarker(runID string) string {
	return "<!-- agentos:home-issue run=" + runID + " -->"
}

// isHomeOf reports whether body is the home issue of run runID: its last
// line is the marker. The quoted prompt cannot forge it: HTML comments are
// removed from the prompt, and it sits inside a code fence above.
func isHomeOf(body, runID string) bool {
	body = strings.TrimRight(body, "\r\n\t ")
	i := strings.LastIndexByte(body, '\n')
	return strings.TrimSpace(body[i+1:]) == homeMarker(runID)
}

var mentionInTitle = regexp.MustCompile(`(^|[^A-Za-z0-9_/])@([A-Za-z0-9][A-Za-z0-9-]*)`)

// homeTitle is "agentos: " and the prompt's first non-blank line, without
// what GitHub would hide (HTML comments, hidden characters), mentions and
// the command word broken by a zero-width space (a title is plain text:
// an HTML entity would show), cut to homeTitleChars.
func homeTitle(prompt, trigger, runID string) string {
	clean, _ := untrusted.GitHubText(prompt, homePromptBytes)
	line := ""
	for _, l := range strings.Split(clean, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			line = l
			break
		}
	}
	if line == "" {
		return "agentos: scheduled run " + runID
	}
	line = mentionInTitle.ReplaceAllString(line, "${1}@\u200b${2}")
	if trigger == "" {
		trigger = "/agent"
	}
	if strings.HasPrefix(strings.ToLower(line), strings.ToLower(trigger)) {
		line = line[:1] + "\u200b" + line[1:]
	}
	title := "agentos: " + line
	if utf8.RuneCountInString(title) > homeTitleChars {
		r := []rune(title)
		title = string(r[:homeTitleChars-1]) + "…"
	}
	return title
}

// homeBody says what the issue is for and quotes the prompt as data: in a
// code fence longer than any backtick run in it, so nothing in it renders
// (no mention notifies, no image loads, no command reads as one), after
// GitHub's invisible text is removed.
func homeBody(prompt, eventName, runURL, runID string) string {
	clean, _ := untrusted.GitHubText(prompt, homePromptBytes)
	clean = strings.TrimSpace(clean)
	longest := 0
	for run, i := 0, 0; i < len(clean); i++ {
		if clean[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	var b strings.Builder
	fmt.Fprintf(&b, "A `%s` workflow run asked agentos for a change without an issue, so this issue is the run's home: its progress, its draft pull request and the approvals it waits for are linked here.\n\n", eventName)
	if runURL != "" {
		fmt.Fprintf(&b, "Workflow run: %s\n\n", runURL)
	}
	fmt.Fprintf(&b, "The request (the workflow's `prompt` input), quoted as data:\n\n%stext\n%s\n%s\n\n", fence, clean, fence)
	b.WriteString(homeMarker(runID))
	b.WriteString("\n")
	return b.String()
}

// homeResult is what opening the home issue decided.
type homeResult struct {
	Number  int
	State   string
	Created bool
	// Refused is the reason the actor may not start a run; no issue was
	// opened.
	Refused string
}

// openHome finds this workflow run's home issue or opens it, after the
// actor is authorized to start a run like any `/agent` request (write
// access, allowed_users): a refused actor leaves nothing on GitHub.
func openHome(ctx context.Context, env Env, client *github.Client, d *dispatch.Dispatcher, t webhook.Trigger, prompt string, log io.Writer) (homeResult, error) {
	if env.RunID == "" {
		return homeResult{}, errors.New("GITHUB_RUN_ID is not set: a scheduled run needs it to open its home issue exactly once")
	}
	if t.Author == "" {
		return homeResult{}, fmt.Errorf("the %s event names no actor (no sender, GITHUB_ACTOR is empty): nobody to authorize the run", t.Event)
	}
	dec := d.Authorizer().Authorize(ctx, auth.Request{Owner: t.Owner, Repo: t.Name, Login: t.Author, UserType: t.AuthorType, Action: auth.ActionRun})
	if !dec.Allowed {
		return homeResult{Refused: fmt.Sprintf("%s may not start a run (%s)", t.Author, dec.Reason)}, nil
	}
	runID := env.RunID
	found, truncated, err := client.FindIssue(ctx, t.Owner, t.Name, github.IssueQuery{Creator: d.BotLogin(), CreatedAfter: time.Now().Add(-homeRerunWindow)},
		func(is *gh.Issue) bool { return isHomeOf(is.GetBody(), runID) })
	if err != nil {
		return homeResult{}, fmt.Errorf("look for the home issue of workflow run %s: %w", runID, err)
	}
	if found != nil {
		fmt.Fprintf(log, "agentos: workflow run %s (attempt %d) already has home issue #%d\n", runID, env.RunAttempt, found.GetNumber())
		return homeResult{Number: found.GetNumber(), State: found.GetState()}, nil
	}
	if truncated {
		// Opening another could duplicate an earlier attempt's issue
		// that the walk did not reach: fail closed.
		return homeResult{}, fmt.Errorf("look for the home issue of workflow run %s: more issues were opened in the last %d days than the search reads, so an earlier attempt's issue cannot be ruled out; nothing was opened", runID, int(homeRerunWindow.Hours()/24))
	}
	runURL := ""
	if env.ServerURL != "" && env.Repository != "" {
		runURL = fmt.Sprintf("%s/%s/actions/runs/%s", strings.TrimSuffix(env.ServerURL, "/"), env.Repository, runID)
	}
	is, err := client.CreateIssue(ctx, t.Owner, t.Name, github.NewIssue{
		Title: homeTitle(prompt, env.Inputs.Trigger, runID),
		Body:  homeBody(prompt, env.EventName, runURL, runID),
	})
	if err != nil {
		return homeResult{}, fmt.Errorf("open the home issue of workflow run %s: %w", runID, err)
	}
	fmt.Fprintf(log, "agentos: opened home issue #%d for workflow run %s\n", is.GetNumber(), runID)
	return homeResult{Number: is.GetNumber(), State: is.GetState(), Created: true}, nil
}
