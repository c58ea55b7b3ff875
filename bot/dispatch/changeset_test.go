package dispatch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// hostileTest is a test of the repository that writes into the worktree
// when the agent runs the tests: a workflow, and an edit of a tracked file.
// It says so on stdout, which go test shows for a failing package.
const hostileTest = `package auth

import (
	"fmt"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	os.MkdirAll(".github/workflows", 0o755)
	os.WriteFile(".github/workflows/evil.yml", []byte("on: push\njobs: {x: {runs-on: ubuntu-latest, steps: [{run: env}]}}\n"), 0o644)
	os.WriteFile("README.md", []byte("rewritten by a test\n"), 0o644)
	fmt.Println("HOSTILE-TEST-WROTE-FILES")
	os.Exit(m.Run())
}
`

// TestCommandWritesAreNotPushed: the demo fix on a repository whose tests
// write a workflow and edit README.md when they run. The agent runs them
// before and after its patch; the session branch — the checkpoint commits
// at the approval pauses and the final commit — holds the patch and none
// of what the tests wrote.
func TestCommandWritesAreNotPushed(t *testing.T) {
	w := newWorld(t)
	gittest.Commit(t, w.bare, "main", "tests that write", map[string]string{"hostile_test.go": hostileTest})
	mainReadme := gittest.Git(t, w.bare, "rev-parse", "main:README.md")

	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	if res.Status != "paused" {
		t.Fatalf("first run: %+v, want paused for approval", res)
	}
	sid := res.SessionID
	// The patch was approved against a worktree that held what the first
	// test run wrote; the resumed worktree, rebuilt from the branch, does
	// not, so the kernel finds the approval stale and asks again, once.
	for i := 0; i < 2 && res.Status == "paused"; i++ {
		res = w.review(res.PR, "alice", "approved", "")
	}
	if res.Status != "completed" {
		t.Fatalf("after approval: %+v", res)
	}

	// The hostile test did run and write (in the sandbox, in the worktree).
	wrote := false
	for _, e := range w.events(sid) {
		if e.Type == event.ToolResult && event.FieldString(e.Payload, "tool") == "test.run" &&
			strings.Contains(event.FieldString(event.Field(e.Payload, "result"), "stdout"), "HOSTILE-TEST-WROTE-FILES") {
			wrote = true
		}
	}
	if !wrote {
		t.Fatal("no test.run shows the hostile test's output: the test proves nothing")
	}

	commits := strings.Fields(gittest.Git(t, w.bare, "rev-list", "main.."+res.Branch))
	if len(commits) == 0 {
		t.Fatal("no session commit on the branch")
	}
	for _, c := range commits {
		files := gittest.Git(t, w.bare, "ls-tree", "-r", "--name-only", c)
		if strings.Contains(files, ".github/workflows/evil.yml") {
			t.Errorf("commit %s holds the workflow a test wrote:\n%s", c, files)
		}
		if got := gittest.Git(t, w.bare, "rev-parse", c+":README.md"); got != mainReadme {
			t.Errorf("commit %s holds README.md as a test rewrote it: %s", c, gittest.Git(t, w.bare, "show", c+":README.md"))
		}
	}
	if got := gittest.Git(t, w.bare, "show", res.Branch+":auth.go"); !strings.Contains(got, "subtle.ConstantTimeCompare") {
		t.Errorf("the patch is not on the branch:\n%s", got)
	}
}

// rewritingTest appends to auth.go once the agent's patch is in it, as a
// formatter or a hostile test run after the patch would.
const rewritingTest = `package auth

import (
	"bytes"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if b, err := os.ReadFile("auth.go"); err == nil && bytes.Contains(b, []byte("subtle")) && !bytes.Contains(b, []byte("backdoor")) {
		os.WriteFile("auth.go", append(b, []byte("\n// backdoor\n")...), 0o644)
	}
	os.Exit(m.Run())
}
`

// TestCommandChangedKernelWriteFailsClosed: a test run after the agent's
// patch rewrites the patched file. The commit of the run refuses it (the
// file no longer holds what repo.patch wrote), the delivery fails for
// good, and neither the patch nor the rewrite is pushed.
func TestCommandChangedKernelWriteFailsClosed(t *testing.T) {
	w := newWorld(t)
	gittest.Commit(t, w.bare, "main", "a test that rewrites", map[string]string{"rewriting_test.go": rewritingTest})
	res := w.comment(w.issue, false, "alice", "/agent "+demo.Prompt)
	if res.Status != "paused" {
		t.Fatalf("first run: %+v, want paused for approval", res)
	}
	pr, _ := w.fake.PR(repoName, res.PR)
	err := w.d.Dispatch(context.Background(), webhook.Trigger{Kind: webhook.KindReview, Number: res.PR, IsPR: true, Author: "alice", AuthorType: "User",
		ReviewState: "approved", HeadSHA: pr.HeadSHA, Repo: repoName, Owner: "octo", Name: "app", DeliveryID: "delivery-approve"})
	var changed *worktree.ChangedError
	if !errors.As(err, &changed) || changed.Path != "auth.go" || !errors.Is(err, webhook.ErrPermanent) {
		t.Fatalf("approval delivery = %v, want a permanent ChangedError for auth.go", err)
	}
	if !strings.Contains(err.Error(), "repo.write or repo.patch") {
		t.Errorf("the error does not say how to fix it: %v", err)
	}
	if c := lastComment(w.fake.Comments(repoName, w.issue), botLogin); !strings.Contains(c.Body, "Nothing was published") || !strings.Contains(c.Body, "auth.go") {
		t.Errorf("the tracking comment does not say that nothing was published and why:\n%s", c.Body)
	}
	for _, c := range strings.Fields(gittest.Git(t, w.bare, "rev-list", "main.."+res.Branch)) {
		if got := gittest.Git(t, w.bare, "show", c+":auth.go"); strings.Contains(got, "backdoor") || strings.Contains(got, "subtle") {
			t.Errorf("commit %s holds auth.go as the run left it:\n%s", c, got)
		}
	}
}
