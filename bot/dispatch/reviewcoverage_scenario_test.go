package dispatch_test

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/runtime/provider/scripted"
)

// TestScenarioReviewNoPersonaReported is `/agent review` through the
// shipped review cycle when every reviewer persona's reply fails its
// schema: the posted review says the pull request was not reviewed and
// names each persona and why, and never "Nothing to report".
func TestScenarioReviewNoPersonaReported(t *testing.T) {
	const bad = `
model: scripted
roles:
  security:
  - text: '{"findings":[{"title":"no severity"}]}'
  - text: '{"findings":[{"title":"no severity"}]}'
  - text: '{"findings":[{"title":"no severity"}]}'
  correctness:
  - text: 'not JSON at all'
  - text: 'not JSON at all'
  - text: 'not JSON at all'
  tests:
  - text: '{"verdict":"pass"}'
  - text: '{"verdict":"pass"}'
  - text: '{"verdict":"pass"}'
`
	w := newWorld(t)
	s, err := scripted.Parse(strings.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	w.script = s
	w.start(t.TempDir())
	head := gittest.Commit(t, w.bare, "find-users", "find users by name", map[string]string{"db.go": planeDBGo})
	w.fake.SetRef(repoName, "heads/find-users", head)
	pr := w.fake.AddPullRequest(repoName, fakegithub.PullRequest{Title: "Find users by name", User: "alice", Head: "find-users", HeadSHA: head, Base: "main",
		Files: []fakegithub.PRFile{{Path: "db.go", Status: "added", Patch: "@@ -0,0 +1,8 @@\n" + prefixLines(planeDBGo, "+")}}})
	w.configure(func(c *dispatch.Config) { c.Workflows = &dispatch.Workflows{OwnPlane: true} })

	res := w.comment(pr, true, "alice", "/agent review")
	reviews := w.fake.Reviews(repoName, pr)
	if len(reviews) != 1 {
		t.Fatalf("result %+v; reviews = %+v, want one", res, reviews)
	}
	body := reviews[0].Body
	for _, want := range []string{"### agentos review: not reviewed", "was **not reviewed**", "(0 of 3 personas reported)",
		"- not reviewed: `security` (failed: ", "- not reviewed: `correctness` (failed: ", "- not reviewed: `tests` (failed: "} {
		if !strings.Contains(body, want) {
			t.Errorf("the review lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "Nothing to report") {
		t.Errorf("a review no persona made says there is nothing to report:\n%s", body)
	}
}
