package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/provider/scripted"
)

// logTo makes the world's dispatcher log at the default level (INFO) into
// a buffer.
func (w *world) logTo() *bytes.Buffer {
	var b bytes.Buffer
	w.configure(func(c *dispatch.Config) { c.Log = slog.New(slog.NewTextHandler(&b, nil)) })
	return &b
}

// lineWith returns the log line with msg, or fails.
func lineWith(t *testing.T, logs, msg string) string {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "msg=\""+msg+"\"") || strings.Contains(l, "msg="+msg+" ") {
			return l
		}
	}
	t.Fatalf("no %q line in the log:\n%s", msg, logs)
	return ""
}

// Every run's outcome is logged at INFO — paused for approval, completed,
// failed with its error class and error, cancelled — with the session,
// repository, issue and pull request.
func TestRunOutcomesLoggedAtInfo(t *testing.T) {
	t.Run("paused then completed", func(t *testing.T) {
		w := newWorld(t)
		logs := w.logTo()
		res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
		l := lineWith(t, logs.String(), "run paused for approval")
		for _, want := range []string{"level=INFO", "session=" + res.SessionID, "repo=octo/app", fmt.Sprintf("issue=%d", w.issue), fmt.Sprintf("pr=%d", res.PR), "pending=1"} {
			if !strings.Contains(l, want) {
				t.Errorf("%q lacks %q", l, want)
			}
		}
		w.review(res.PR, "alice", "approved", "")
		l = lineWith(t, logs.String(), "run completed")
		for _, want := range []string{"level=INFO", "session=" + res.SessionID, "repo=octo/app", fmt.Sprintf("issue=%d", w.issue), fmt.Sprintf("pr=%d", res.PR), "status=completed"} {
			if !strings.Contains(l, want) {
				t.Errorf("%q lacks %q", l, want)
			}
		}
	})
	t.Run("failed", func(t *testing.T) {
		w := newWorld(t)
		s, err := demo.Script()
		if err != nil {
			t.Fatal(err)
		}
		for role := range s.Roles {
			s.Roles[role] = []scripted.Entry{{Error: &scripted.Failure{Message: "401 invalid api key", Status: 401}}}
		}
		w.script = s
		w.start(t.TempDir())
		logs := w.logTo()
		res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
		if res.Status != "failed" {
			t.Fatalf("result = %+v, want a failed run", res)
		}
		l := lineWith(t, logs.String(), "run failed")
		for _, want := range []string{"level=INFO", "session=" + res.SessionID, "repo=octo/app", fmt.Sprintf("issue=%d", w.issue), "status=failed", "error_class=", "error="} {
			if !strings.Contains(l, want) {
				t.Errorf("%q lacks %q", l, want)
			}
		}
		if strings.Contains(l, "error_class= ") || strings.Contains(l, `error=""`) {
			t.Errorf("the failure's class or error is empty: %q", l)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		w := newWorld(t)
		logs := w.logTo()
		res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
		w.dispatch(webhook.Trigger{Kind: webhook.KindPRClosed, Number: res.PR, IsPR: true, Author: "alice"})
		l := lineWith(t, logs.String(), "run cancelled")
		for _, want := range []string{"level=INFO", "session=" + res.SessionID, "repo=octo/app", fmt.Sprintf("pr=%d", res.PR), "error="} {
			if !strings.Contains(l, want) {
				t.Errorf("%q lacks %q", l, want)
			}
		}
	})
}

// A failing Preflight stops a new run before any work is written to
// GitHub: no tracking comment, branch, pull request or session. The
// error is logged at ERROR; it is retried by the queue unless it wraps
// webhook.ErrPermanent. When no retry follows (a permanent failure, or the
// queue's last attempt) the user is told in one comment that says what to
// do and leaves the provider's own message (an internal endpoint) out.
func TestPreflight(t *testing.T) {
	unreachable := errors.New("model endpoint http://127.0.0.1:9/v1 unreachable: connection refused")
	rejected := fmt.Errorf("model endpoint rejected the key (401): %w", webhook.ErrPermanent)
	tests := []struct {
		name      string
		err       error
		permanent bool
		final     bool
		told      string
	}{
		{"unreachable endpoint: retried", unreachable, false, false, ""},
		{"unreachable endpoint on the last attempt: told", unreachable, false, true, "did not answer"},
		{"rejected key: permanent", rejected, true, false, "refused the bot's configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			logs := w.logTo()
			calls := 0
			w.configure(func(c *dispatch.Config) { c.Preflight = func(context.Context) error { calls++; return tt.err } })
			w.fake.AddComment(repoName, w.issue, "alice", "/agent "+demo.Prompt)
			w.fake.ResetCalls()
			err := w.d.Dispatch(context.Background(), webhook.Trigger{Kind: webhook.KindComment, Repo: repoName, Owner: "octo", Name: "app", Number: w.issue,
				Author: "alice", AuthorType: "User", Body: "/agent " + demo.Prompt, IssueState: "open", DeliveryID: "d-pre", FinalAttempt: tt.final})
			if !errors.Is(err, dispatch.ErrPreflight) || !errors.Is(err, tt.err) {
				t.Fatalf("Dispatch = %v, want ErrPreflight wrapping %v", err, tt.err)
			}
			if got := errors.Is(err, webhook.ErrPermanent); got != tt.permanent {
				t.Errorf("permanent = %v, want %v", got, tt.permanent)
			}
			if calls != 1 {
				t.Errorf("Preflight called %d times", calls)
			}
			// Only the permission check reached GitHub, and the comment
			// when the user is told.
			for k := range w.fake.Calls() {
				if k != "GET /repos/{owner}/{repo}/collaborators/{username}/permission" && (tt.told == "" || k != "POST /repos/{owner}/{repo}/issues/{issue_number}/comments") {
					t.Errorf("GitHub was called: %s", k)
				}
			}
			c := lastComment(w.fake.Comments(repoName, w.issue), botLogin)
			switch {
			case tt.told == "" && c.ID != 0:
				t.Errorf("the bot commented on a failure the queue retries: %q", c.Body)
			case tt.told != "" && (!strings.Contains(c.Body, tt.told) || !strings.HasPrefix(c.Body, "@alice ") || !strings.Contains(c.Body, "agentos doctor")):
				t.Errorf("comment %q, want it to say %q, to @alice, naming agentos doctor", c.Body, tt.told)
			case strings.Contains(c.Body, "127.0.0.1") || strings.Contains(c.Body, "401"):
				t.Errorf("the comment shows the provider's message: %q", c.Body)
			}
			if prs := w.fake.PRs(repoName); len(prs) != 0 {
				t.Errorf("pull requests: %+v", prs)
			}
			if refs := gittest.Git(t, w.bare, "for-each-ref", "--format=%(refname)", "refs/heads/agent/"); refs != "" {
				t.Errorf("branches: %s", refs)
			}
			if s := w.fakeSessions(); len(s) != 0 {
				t.Errorf("sessions: %v", s)
			}
			l := lineWith(t, logs.String(), "run not started: preflight failed")
			if !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "connection refused") && !strings.Contains(l, "rejected the key") {
				t.Errorf("log line %q", l)
			}
			if n := strings.Count(logs.String(), "level=ERROR"); n != 1 {
				t.Errorf("%d ERROR lines, want 1:\n%s", n, logs)
			}
		})
	}
	// Answers to a paused run do not call it: only new runs do.
	w := newWorld(t)
	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	w.configure(func(c *dispatch.Config) { c.Preflight = func(context.Context) error { return unreachable } })
	if got := w.review(res.PR, "alice", "approved", ""); got.Status != "completed" {
		t.Errorf("approval with a failing preflight: %+v", got)
	}
}
