// Package demo owns `agentos demo --github`: scenario 1 of the bot ("fix
// from an issue") played as a program against a fake GitHub on loopback
// (the REST API, GraphQL, git over HTTP and the webhooks GitHub sends), so
// that a newcomer can watch the whole flow without a GitHub account or
// network. The bot runs as a GitHub App, the way it is deployed: the
// webhook payloads carry the installation, the bot mints an installation
// token and uses it for the API and git. Past the fake everything is the
// production code: the dispatcher, the GitHub client, the permission
// check, the worktree manager pushing over HTTP, the runtime with the
// scripted demo model, the SQLite store. It prints what a maintainer would
// see on GitHub and checks the committed session log.
//
// It needs only git on PATH (git http-backend serves the repository). The
// fake GitHub runs without GitHub's OpenAPI description
// (fakegithub.NewUnchecked), with the same authentication rules; the tests
// of the bot validate against the description.
package demo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/provider/scripted"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/agentos/agentos/schemas"
	gh "github.com/google/go-github/v62/github"
)

// The demo's cast and repository.
const (
	Owner      = "octo"
	Name       = "app"
	Repo       = Owner + "/" + Name
	AppSlug    = "agentos"
	BotLogin   = AppSlug + "[bot]"
	AppID      = 1001
	InstallID  = 2002
	Maintainer = "mona"
	IssueTitle = "The token check accepts a prefix of the secret"
)

// Options configure Run.
type Options struct {
	// Dir receives everything the demo creates: the git host's bare
	// repository, the bot's store and worktree cache, and events.jsonl. It
	// must not exist yet, or be empty.
	Dir string
	// Out receives the walkthrough.
	Out io.Writer
	// Log receives the bot's own warnings and errors (default: discarded).
	Log io.Writer
}

// Report is how the demo ended.
type Report struct {
	SessionID string
	PR        int
	Branch    string
	Status    string // the run's final status: completed when all went well
	// LogPath is the committed events.jsonl, copied out of the artifact
	// branch.
	LogPath string
	Verify  replay.Report
}

// ErrDirNotEmpty marks an Options.Dir that already holds files: the demo
// never writes over anything.
var ErrDirNotEmpty = errors.New("demo: the output directory is not empty")

// ErrFailed marks a demo that ran but did not reach the expected end (the
// run did not complete, the log does not verify, the bot called GitHub
// outside the fake's routes).
var ErrFailed = errors.New("demo: scenario failed")

// Run plays the scenario and prints it to o.Out. It returns an error
// wrapping ErrFailed when the scenario ran but ended wrong, and other
// errors when the demo could not run at all (no git, no loopback port).
func Run(ctx context.Context, o Options) (Report, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Dir == "" {
		return Report{}, errors.New("demo: Options.Dir is required")
	}
	if err := emptyDir(o.Dir); err != nil {
		return Report{}, err
	}
	w, err := newWorld(ctx, o)
	if err != nil {
		return Report{}, err
	}
	rep, err := w.play(ctx)
	return rep, errors.Join(err, w.close())
}

func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("%w: %s; choose an empty --out", ErrDirNotEmpty, dir)
	}
	return nil
}

// world is GitHub (the fake, which also hosts git) and the bot process.
type world struct {
	o       Options
	home    string // HOME for every git command
	bare    string
	fake    *fakegithub.Fake
	api     *fakegithub.Server // the fake GitHub: REST API, git over HTTP, webhooks
	appKey  []byte             // the app's private key (PEM)
	mona    *github.Client
	issue   int
	store   *sqlite.Store
	d       *dispatch.Dispatcher
	results []dispatch.Result
	seen    int               // webhook deliveries already handed to the bot
	shown   map[string]string // what the walkthrough printed: "comment 12" → body
}

func newWorld(ctx context.Context, o Options) (w *world, err error) {
	w = &world{o: o, home: filepath.Join(o.Dir, "home"), shown: map[string]string{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.close())
		}
	}()
	gitRoot := filepath.Join(o.Dir, "github", "git")
	sample := filepath.Join(o.Dir, "github", "seed")
	for _, d := range []string{w.home, gitRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return w, err
		}
	}
	if err := demo.WriteSample(sample); err != nil {
		return w, err
	}
	if w.bare, err = seedBare(ctx, w.home, gitRoot, Owner, Name, sample); err != nil {
		return w, err
	}
	monaToken, err := newToken()
	if err != nil {
		return w, err
	}
	if w.fake, err = fakegithub.NewUnchecked(); err != nil {
		return w, err
	}
	// The bot is a GitHub App installed on the repository: it proves
	// itself with a JWT signed by its private key, and acts through an
	// installation token it mints (the API and git over HTTP alike).
	app, key, err := fakegithub.NewApp(AppID, AppSlug)
	if err != nil {
		return w, err
	}
	w.appKey = key
	w.fake.AddRepo(fakegithub.Repo{Owner: Owner, Name: Name})
	w.fake.BackWithGit(Repo, w.bare)
	w.fake.AddApp(app)
	w.fake.AddInstallation(InstallID, AppID, Repo)
	w.fake.AddToken(monaToken, Maintainer)
	w.fake.SetPermission(Repo, Maintainer, fakegithub.PermMaintain)
	w.issue = w.fake.AddIssue(Repo, fakegithub.Issue{Title: IssueTitle, Body: "`Check` in auth.go lets a prefix of the secret through; `go test ./...` fails.", User: Maintainer})
	// One server plays github.com: the REST API, GraphQL, and git over
	// HTTP at /<owner>/<name>.git, as the bot expects of a GitHub host.
	if w.api, err = fakegithub.Start(w.fake); err != nil {
		return w, err
	}
	if w.mona, err = github.New(github.Config{BaseURL: w.api.URL, Token: monaToken}); err != nil {
		return w, err
	}
	return w, w.startBot(filepath.Join(o.Dir, "bot"))
}

// startBot wires the bot process as `agentos serve` does, with the
// scripted demo model in place of a provider.
func (w *world) startBot(dir string) error {
	sealer, err := event.NewSealer(schemas.MustDefault(), redact.New(nil), nil)
	if err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	if w.store, err = sqlite.Open(data, sealer, sqlite.Options{}); err != nil {
		return err
	}
	script, err := demo.Script()
	if err != nil {
		return err
	}
	profile := provider.DefaultProfile()
	profile.Provider, profile.Model, profile.Script = "scripted", "scripted-demo", "embedded"
	profile.Pricing = provider.Pricing{InputPerMTok: 3, OutputPerMTok: 15}
	providers := provider.Registry{"scripted": func(context.Context, provider.Profile) (provider.Provider, error) { return scripted.New(script), nil }}
	st := w.store
	engines := func(ctx context.Context, r dispatch.EngineRequest) (*run.Engine, func(), error) {
		env, err := setup.Build(ctx, setup.Options{Dir: r.Dir, Runs: r.Runs, RequireWorkflows: true, Profile: profile, Providers: providers, SessionID: r.SessionID, Store: st, UntrustedRepo: r.Untrusted})
		if err != nil {
			return nil, nil, err
		}
		return env.Engine, env.Close, nil
	}
	// The same wiring as `agentos serve` configured for a GitHub App.
	cfg := config.Default()
	cfg.DataDir, cfg.GitHubAPIURL = dir, w.api.URL+"/"
	cfg.GitHubAppID, cfg.GitHubPrivateKey = AppID, w.appKey
	bot, err := dispatch.NewGitHubBot(cfg, st, engines, slog.New(slog.NewTextHandler(w.o.Log, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	w.d, err = bot.Dispatcher(context.Background(), dispatch.BotOptions{Result: func(r dispatch.Result) { w.results = append(w.results, r) }})
	return err
}

// close shuts the servers down and closes the store; safe on a partly
// built world.
func (w *world) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if w.api != nil {
		errs = append(errs, w.api.Close(ctx))
	}
	if w.store != nil {
		errs = append(errs, w.store.Close())
	}
	return errors.Join(errs...)
}

// deliver hands the webhooks GitHub sent since the last call to the bot,
// as the webhook server does after verifying them (the bot's own events
// are dropped first), and returns the result of the one it acted on.
func (w *world) deliver(ctx context.Context) (dispatch.Result, error) {
	var acted []dispatch.Result
	for _, d := range w.fake.DeliveriesSince(w.seen) {
		w.seen++
		if strings.EqualFold(d.Sender(), BotLogin) {
			continue
		}
		t, ok, err := webhook.Normalize(d.Event, d.ID, d.Body)
		if err != nil {
			return dispatch.Result{}, fmt.Errorf("demo: the %s webhook: %w", d.Event, err)
		}
		if !ok {
			continue
		}
		n := len(w.results)
		err = w.d.Dispatch(ctx, t)
		if len(w.results) != n+1 {
			return dispatch.Result{}, errors.Join(err, fmt.Errorf("the bot reported %d results for one event", len(w.results)-n))
		}
		if err != nil {
			return w.results[n], err
		}
		acted = append(acted, w.results[n])
	}
	if len(acted) != 1 {
		return dispatch.Result{}, fmt.Errorf("%w: the bot acted on %d webhooks, want 1", ErrFailed, len(acted))
	}
	return acted[0], nil
}

func (w *world) play(ctx context.Context) (Report, error) {
	p := &printer{w: w.o.Out}
	p.title("agentos demo --github: a maintainer asks the bot to fix a bug, on a fake GitHub")
	p.line("GitHub       %s  (fake GitHub API and webhooks, in this process; git http-backend over %s)", w.api.URL, w.bare)
	p.line("repository   %s: a small Go module whose tests fail on main", Repo)
	p.line("people       %s (maintainer), %s (the bot: GitHub App %d, installation %d)", Maintainer, BotLogin, AppID, InstallID)
	p.line("work dir     %s", w.o.Dir)

	// 1. The maintainer asks.
	body := "/agent " + demo.Prompt
	p.step("1. %s comments on issue #%d %q", Maintainer, w.issue, IssueTitle)
	c, err := w.mona.CreateComment(ctx, github.Repo{Owner: Owner, Name: Name}, w.issue, body)
	if err != nil {
		return Report{}, fmt.Errorf("demo: the maintainer's comment: %w", err)
	}
	w.shown[fmt.Sprintf("comment %d", c)] = body
	p.markdown(fmt.Sprintf("comment by %s on issue #%d", Maintainer, w.issue), body)
	res, err := w.deliver(ctx) // GitHub's issue_comment webhook
	if err != nil {
		return Report{}, fmt.Errorf("demo: the bot on the comment: %w", err)
	}
	rep := Report{SessionID: res.SessionID, PR: res.PR, Branch: res.Branch, Status: res.Status}
	if res.Outcome != "started" || res.Status != "paused" || res.PR == 0 {
		return rep, fmt.Errorf("%w: after the comment the bot answered %s/%s (%s), want a run paused for approval on a pull request", ErrFailed, res.Outcome, res.Status, res.Reason)
	}

	// 2. What the bot did: reaction, tracking comment, draft PR, approval review.
	p.step("2. %s starts session %s and pauses for approval", BotLogin, res.SessionID)
	w.showReactions(p, c)
	w.showComments(p, w.issue, "issue", "while paused")
	pr, _ := w.fake.PR(Repo, res.PR)
	if !pr.Draft {
		return rep, fmt.Errorf("%w: pull request #%d is not a draft while the run waits for approval", ErrFailed, pr.Number)
	}
	w.showPR(p, pr)
	w.showComments(p, pr.Number, "pull request", "")
	reviews := w.showReviews(p, pr.Number)
	if len(reviews) == 0 {
		return rep, fmt.Errorf("%w: no approval review on pull request #%d", ErrFailed, pr.Number)
	}

	// 3. The maintainer approves with a review.
	review := "Reviewed the diff: the constant-time comparison is right. Go ahead."
	p.step("3. %s submits a review on pull request #%d: Approve", Maintainer, pr.Number)
	rv, _, err := w.mona.GitHub().PullRequests.CreateReview(ctx, Owner, Name, pr.Number, &gh.PullRequestReviewRequest{
		CommitID: gh.String(pr.HeadSHA), Body: gh.String(review), Event: gh.String("APPROVE")})
	if err != nil {
		return rep, fmt.Errorf("demo: the maintainer's review: %w", err)
	}
	// The pull_request_review webhook carries the state GitHub recorded.
	w.shown[fmt.Sprintf("review %d", rv.GetID())] = review
	p.markdown(fmt.Sprintf("review by %s on pull request #%d (%s)", Maintainer, pr.Number, rv.GetState()), review)
	res, err = w.deliver(ctx)
	if err != nil {
		return rep, fmt.Errorf("demo: the bot on the review: %w", err)
	}
	rep.Status = res.Status

	// 4. The run resumes and completes.
	p.step("4. %s resumes the run: it ends %s", BotLogin, res.Status)
	w.showComments(p, w.issue, "issue", "final")
	pr, _ = w.fake.PR(Repo, pr.Number)
	state := "ready for review"
	if pr.Draft {
		state = "still a draft"
	}
	p.line("pull request #%d is %s (%s → %s)", pr.Number, state, pr.Head, pr.Base)
	w.showComments(p, pr.Number, "pull request", "")
	w.showReviews(p, pr.Number)
	if w.shown["pr body"] != pr.Body {
		p.markdown(fmt.Sprintf("pull request #%d description (edited)", pr.Number), pr.Body)
	}

	// 5. What git says.
	p.step("5. The repository, read with the git CLI")
	if err := w.showGit(ctx, p, res.Branch, res.SessionID); err != nil {
		return rep, err
	}

	// 6. The committed log verifies.
	p.step("6. Verify the session log committed on %s", worktree.DefaultArtifactBranch)
	if rep.LogPath, rep.Verify, err = w.verify(ctx, res.SessionID); err != nil {
		return rep, err
	}
	verdict := "OK"
	if !rep.Verify.Valid {
		verdict = fmt.Sprintf("INVALID (%v)", rep.Verify.Problem)
	}
	p.line("sessions/%s/events.jsonl: %d events, closed: %v", res.SessionID, rep.Verify.Events, rep.Verify.Closed)
	p.line("copied to %s", rep.LogPath)
	p.line("agentos verify: %s", verdict)

	var problems []string
	if res.Status != "completed" {
		problems = append(problems, fmt.Sprintf("the run ended %s (%s), want completed", res.Status, res.Reason))
	}
	if pr.Draft {
		problems = append(problems, fmt.Sprintf("pull request #%d is still a draft", pr.Number))
	}
	if !rep.Verify.Valid || !rep.Verify.Closed {
		problems = append(problems, "the committed log does not verify as a closed session")
	}
	for _, v := range w.fake.Violations() {
		problems = append(problems, "the bot called GitHub outside the fake's routes: "+v.String())
	}
	if len(problems) > 0 {
		return rep, fmt.Errorf("%w: %s", ErrFailed, strings.Join(problems, "; "))
	}
	p.title("Done: issue → draft PR → approval review → Approve → completed, PR ready, log verified.")
	p.line("Replay it:  agentos replay %s", rep.LogPath)
	return rep, nil
}

// showReactions prints the bot's reactions on a comment.
func (w *world) showReactions(p *printer, id int64) {
	for _, c := range w.fake.Comments(Repo, w.issue) {
		if c.ID == id && len(c.Reactions) > 0 {
			p.line("%s reacts to the comment: %s", BotLogin, strings.Join(c.Reactions, ", "))
		}
	}
}

// showComments prints the bot's comments on issue or PR n that are new or
// edited since the walkthrough last showed them.
func (w *world) showComments(p *printer, n int, kind, note string) {
	for _, c := range w.fake.Comments(Repo, n) {
		k := fmt.Sprintf("comment %d", c.ID)
		if prev, ok := w.shown[k]; ok && prev == c.Body {
			continue
		}
		what := "comment"
		if _, ok := w.shown[k]; ok {
			what = "comment, edited"
		}
		w.shown[k] = c.Body
		label := fmt.Sprintf("%s by %s on %s #%d", what, c.User, kind, n)
		if note != "" {
			label += " (" + note + ")"
		}
		p.markdown(label, c.Body)
	}
}

func (w *world) showPR(p *printer, pr fakegithub.PullRequest) {
	draft := ""
	if pr.Draft {
		draft = "draft "
	}
	p.line("%s opens %spull request #%d: %q (%s → %s)", pr.User, draft, pr.Number, pr.Title, pr.Head, pr.Base)
	w.shown["pr body"] = pr.Body
	p.markdown(fmt.Sprintf("pull request #%d description", pr.Number), pr.Body)
}

// showReviews prints reviews and their line comments not shown yet, and
// returns the bot's reviews.
func (w *world) showReviews(p *printer, n int) []fakegithub.Review {
	var bots []fakegithub.Review
	lines := w.fake.ReviewComments(Repo, n)
	for _, r := range w.fake.Reviews(Repo, n) {
		if r.User == BotLogin {
			bots = append(bots, r)
		}
		k := fmt.Sprintf("review %d", r.ID)
		if _, ok := w.shown[k]; ok {
			continue
		}
		w.shown[k] = r.Body
		p.markdown(fmt.Sprintf("review by %s on pull request #%d (%s, commit %.7s)", r.User, n, r.State, r.CommitID), r.Body)
		for _, lc := range lines {
			if lc.ReviewID == r.ID {
				p.markdown(fmt.Sprintf("line comment on %s:%d", lc.Path, lc.Line), lc.Body)
			}
		}
	}
	return bots
}

// showGit prints the session branch, its commit and the artifact commit.
func (w *world) showGit(ctx context.Context, p *printer, branch, sid string) error {
	g := func(args ...string) (string, error) { return git(ctx, w.home, w.bare, args...) }
	refs, err := g("for-each-ref", "--format=%(objectname:short)  %(refname:short)", "refs/heads/")
	if err != nil {
		return err
	}
	p.line("$ git for-each-ref refs/heads/")
	p.block(refs)
	commit, err := g("log", "-1", "--format=%h %an <%ae>%n%n%B", branch)
	if err != nil {
		return err
	}
	p.line("$ git log -1 %s", branch)
	p.block(commit)
	stat, err := g("diff", "--stat", "main..."+branch)
	if err != nil {
		return err
	}
	p.line("$ git diff --stat main...%s", branch)
	p.block(stat)
	art, err := g("log", "-1", "--format=%h %an: %s", worktree.DefaultArtifactBranch)
	if err != nil {
		return err
	}
	files, err := g("ls-tree", "-r", "--name-only", worktree.DefaultArtifactBranch, "sessions/"+sid+"/")
	if err != nil {
		return err
	}
	p.line("$ git log -1 %s; git ls-tree -r --name-only %s sessions/%s/", worktree.DefaultArtifactBranch, worktree.DefaultArtifactBranch, sid)
	p.block(art + "\n" + files)
	return nil
}

// verify reads the committed log out of the artifact branch with the git
// CLI, writes it to Dir/events.jsonl and verifies it.
func (w *world) verify(ctx context.Context, sid string) (string, replay.Report, error) {
	raw, err := git(ctx, w.home, w.bare, "show", worktree.DefaultArtifactBranch+":sessions/"+sid+"/events.jsonl")
	if err != nil {
		return "", replay.Report{}, fmt.Errorf("%w: no committed log: %v", ErrFailed, err)
	}
	path := filepath.Join(w.o.Dir, "events.jsonl")
	if err := os.WriteFile(path, []byte(raw+"\n"), 0o644); err != nil {
		return "", replay.Report{}, err
	}
	rep, err := replay.VerifyReader(schemas.MustDefault(), strings.NewReader(raw+"\n"))
	return path, rep, err
}

// newToken returns a random token shaped like a GitHub installation token.
func newToken() (string, error) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 36)
	for i := range b {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		b[i] = alphabet[n.Int64()]
	}
	return "ghs_" + string(b), nil
}
