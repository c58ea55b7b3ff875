package dispatch_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/internal/gittest"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/openai"
	"github.com/agentos/agentos/runtime/provider/simulator"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
	gh "github.com/google/go-github/v62/github"
)

// newSimWorld is newLiveWorld in token mode with the bot's model the
// simulator playing b (the openai provider pointed at it, as `agentos
// serve` is pointed at a compatible server), on the demo repository plus
// the large log the huge-output behaviour reads.
func newSimWorld(t *testing.T, sim *simulator.Server, b simulator.Behaviour) *liveWorld {
	t.Helper()
	testenv.LookPath(t, "git")
	w := &liveWorld{t: t, fake: fakegithub.New(t), mode: "token", human: map[string]int{}, logs: &bytes.Buffer{}}
	w.url = w.fake.Serve(t)
	sample := t.TempDir()
	if err := demo.WriteSample(sample); err != nil {
		t.Fatal(err)
	}
	var big strings.Builder
	for i := 0; big.Len() < 2<<20; i++ {
		big.WriteString("2026-11-28T20:00:00Z GET /api/items?page=1 token=rejected client=" + strings.Repeat("x", i%40) + "\n")
	}
	if err := os.MkdirAll(filepath.Join(sample, filepath.Dir(simulator.HugeFile)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sample, simulator.HugeFile), []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bare, err := w.fake.AddGitRepo(context.Background(), fakegithub.Repo{Owner: "octo", Name: "app", Private: true}, t.TempDir(), gittest.WriteTree(t, sample))
	if err != nil {
		t.Fatal(err)
	}
	w.bare = bare
	w.fake.AddToken(aliceTok, "alice")
	w.fake.SetPermission(repoName, "alice", fakegithub.PermMaintain)
	w.fake.AddToken(botUserTok, "agentos-bot")
	w.fake.SetPermission(repoName, "agentos-bot", fakegithub.PermWrite)
	cfg := config.Default()
	cfg.DataDir, cfg.GitHubAPIURL, cfg.GitHubToken = t.TempDir(), w.url, botUserTok
	if w.alice, err = github.New(github.Config{BaseURL: w.url, Token: aliceTok}); err != nil {
		t.Fatal(err)
	}
	w.cfg = cfg
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.TempDir(), sealer, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	prof := provider.DefaultProfile()
	prof.Provider, prof.Model, prof.BaseURL = "openai", b.Model(), sim.URL()
	reg := provider.Registry{"openai": func(ctx context.Context, p provider.Profile) (provider.Provider, error) {
		return openai.New(p, openai.Options{})
	}}
	engines := func(ctx context.Context, r dispatch.EngineRequest) (*run.Engine, func(), error) {
		env, err := setup.Build(ctx, setup.Options{Dir: r.Dir, Runs: r.Runs, RequireWorkflows: true, UntrustedRepo: r.Untrusted, Profile: prof, Providers: reg, SessionID: r.SessionID, Store: st})
		if err != nil {
			return nil, nil, err
		}
		return env.Engine, env.Close, nil
	}
	if w.bot, err = dispatch.NewGitHubBot(cfg, st, engines, slog.New(slog.NewTextHandler(w.logs, nil))); err != nil {
		t.Fatal(err)
	}
	w.opts.Result = func(r dispatch.Result) { w.results = append(w.results, r) }
	t.Cleanup(func() { w.fake.CheckNoViolations(t) })
	return w
}

// TestSimulatorMatrixThroughTheBot runs every behaviour of the
// misbehaving-model simulator through the bot against the strict fake
// GitHub: a maintainer's `/agent <request>` comment on an issue, then an
// Approve review (a Request-changes review where the behaviour is about a
// denial) on the session's pull request for every approval the run asks,
// until the run ends. The session log the bot committed to agent-sessions
// must pass strict verify and show the honest outcome; a run that does not
// complete must say why on the tracking comment. -v prints the matrix.
func TestSimulatorMatrixThroughTheBot(t *testing.T) {
	testenv.LookPath(t, "go") // test.run runs the sample's go test
	sim := simulator.Start(t)
	var rows []simulator.Row
	for _, b := range simulator.Behaviours() {
		row := simulator.Row{Behaviour: b}
		t.Run(b.Name, func(t *testing.T) {
			w := newSimWorld(t, sim, b)
			w.login()
			ctx := context.Background()
			issue := w.fake.AddIssue(repoName, fakegithub.Issue{Title: "token check accepts prefixes", User: "alice"})
			w.asHuman(func() error {
				_, err := w.alice.CreateComment(ctx, github.Repo{Owner: "octo", Name: "app"}, issue, "/agent "+simulator.Prompt)
				return err
			})
			got := w.deliver()
			if len(got) != 1 || got[0].Outcome != "started" {
				t.Fatalf("after the comment: %+v\n%s", got, w.logs)
			}
			res := got[0]
			for round := 0; res.Status == "paused"; round++ {
				if round == 6 || res.PR == 0 {
					t.Fatalf("round %d: still paused: %+v", round, res)
				}
				pr, _ := w.fake.PR(repoName, res.PR)
				review := &gh.PullRequestReviewRequest{CommitID: gh.String(pr.HeadSHA), Body: gh.String("Looks right."), Event: gh.String("APPROVE")}
				if b.Deny {
					review.Body, review.Event = gh.String("Not this change."), gh.String("REQUEST_CHANGES")
				}
				w.asHuman(func() error {
					_, _, err := w.alice.GitHub().PullRequests.CreateReview(ctx, "octo", "app", res.PR, review)
					return err
				})
				got = w.deliver()
				if len(got) != 1 || got[0].SessionID != res.SessionID {
					t.Fatalf("round %d: after the review: %+v", round, got)
				}
				res = got[0]
			}
			log := gittest.Git(t, w.bare, "show", "agent-sessions:sessions/"+res.SessionID+"/events.jsonl")
			// auth.go as the user gets it: on the session's branch, else
			// (no branch was published) as it was.
			ref := "HEAD"
			if res.Branch != "" && exec.Command("git", "-C", w.bare, "rev-parse", "--verify", "-q", "refs/heads/"+res.Branch).Run() == nil {
				ref = res.Branch
			}
			authGo := gittest.Git(t, w.bare, "show", ref+":auth.go")
			v := simulator.Judge(b, []byte(log+"\n"), authGo)
			row.Add(v)
			if !v.Honest || len(v.Dishonest) > 0 {
				t.Errorf("did %q\ndishonest: %q\nnot shown: %q\nbot log:\n%s", v.Did, v.Dishonest, v.Missing, w.logs)
			}
			if res.Status != "completed" {
				var tracking string
				for _, c := range w.fake.Comments(repoName, issue) {
					if c.User == w.botLogin {
						tracking = c.Body
					}
				}
				if code := b.Honest.Code; !strings.Contains(tracking, code) {
					t.Errorf("the tracking comment does not say %s:\n%s", code, tracking)
				}
			}
		})
		rows = append(rows, row)
	}
	t.Logf("simulator matrix through the bot (strict fake GitHub):\n%s", simulator.Table(rows))
}
