// Package e2e runs the agentos binary as a user would, against
// counterparts it did not write the rules of: `agentos serve` as a
// separate process, configured only through the environment variables the
// README documents, driven by webhooks from the strict fake GitHub (every
// request and response checked against GitHub's OpenAPI description, App
// JWTs refused outside /app, installation tokens scoped and expiring) and
// answering through an OpenAI-compatible model server that reads its
// prompts (runtime/provider/fakemodel).
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/provider/fakemodel"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/schemas"
	gh "github.com/google/go-github/v62/github"
)

const (
	owner, name = "octo", "app"
	repoName    = owner + "/" + name
	maintainer  = "alice"
	modelKey    = "sk-e2e-model-key-4f1d2c"
	modelName   = "m"
	secret      = "e2e-webhook-secret"
	appID       = 4242
	install     = 77
	botUser     = "agentos-bot" // token mode: the token's user
	budget      = 16            // REST + GraphQL calls per full flow (docs/github.md, the call budget)
	// appBudget is App mode's first flow on a new repository, in a new
	// process (docs/measurements.md, "GitHub API calls of an App-mode
	// /agent fix flow"): commits on an existing branch are one GraphQL
	// createCommitOnBranch each, but the new session branch and the
	// artifact branch's first commit go through the Git Data API (a
	// tree, a commit and a ref), and the App's identity, token and the
	// webhook reconciler's delivery log add one call each.
	appBudget = 18
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// agentosBinary builds cmd/agentos once per test process, as a user
// would build it (`go build ./cmd/agentos`).
func agentosBinary(t *testing.T) string {
	t.Helper()
	testenv.LookPath(t, "go")
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentos-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "agentos")
		cmd := exec.Command("go", "build", "-tags", binaryTags, "-o", binary, "./cmd/agentos")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/agentos: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// A scenario is one way a maintainer runs the bot.
type scenario struct {
	name string
	app  bool // GitHub App (else a token)
	// apiPath is appended to the fake's URL for AGENTOS_GITHUB_API_URL:
	// "" like a github.com-style host, "/api/v3" as GitHub Enterprise
	// Server's REST root is usually given.
	apiPath string
	// ignoreFormat makes the model server ignore response_format and
	// answer with fenced, wrapped or drifting JSON.
	ignoreFormat bool
}

// TestServeAgainstRealCounterparts: `agentos serve` with OPENAI_BASE_URL,
// OPENAI_API_KEY, AGENTOS_PROVIDER and AGENTOS_MODEL completes the whole
// flow (maintainer's `/agent fix …` → draft PR and approval review →
// Approve review → run completed, PR ready, log committed to
// agent-sessions) against the strict fake GitHub, in token mode, App mode
// and with an Enterprise-style …/api/v3 URL, with the model server
// honouring or ignoring response_format, within the call budget.
func TestServeAgainstRealCounterparts(t *testing.T) {
	testenv.LookPath(t, "git")
	bin := agentosBinary(t)
	for _, sc := range []scenario{
		{name: "token", app: false},
		{name: "token, model ignores response_format", app: false, ignoreFormat: true},
		{name: "app, model ignores response_format", app: true, ignoreFormat: true},
		{name: "app on an Enterprise /api/v3 URL", app: true, apiPath: "/api/v3"},
	} {
		t.Run(sc.name, func(t *testing.T) { runScenario(t, bin, sc) })
	}
}

func runScenario(t *testing.T, bin string, sc scenario) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	fake, srv, bare := startGitHub(ctx, t)

	env := map[string]string{
		"AGENTOS_PROVIDER":       "openai",
		"AGENTOS_MODEL":          modelName,
		"OPENAI_API_KEY":         modelKey,
		"AGENTOS_WEBHOOK_SECRET": secret,
		"AGENTOS_GITHUB_API_URL": srv.URL + sc.apiPath,
	}
	var botActors []string
	secrets := []string{modelKey}
	if sc.app {
		app, key, err := fakegithub.NewApp(appID, "agentos")
		if err != nil {
			t.Fatal(err)
		}
		fake.AddApp(app)
		fake.AddInstallation(install, appID, repoName)
		keyFile := filepath.Join(t.TempDir(), "app.pem")
		if err := os.WriteFile(keyFile, key, 0o600); err != nil {
			t.Fatal(err)
		}
		env["AGENTOS_GITHUB_APP_ID"] = fmt.Sprint(appID)
		env["AGENTOS_GITHUB_PRIVATE_KEY_FILE"] = keyFile
		botActors = []string{app.BotLogin(), fmt.Sprintf("app:%d", appID)}
	} else {
		const botTok = "ghp_e2eBotToken000000000000000000000000"
		fake.AddToken(botTok, botUser)
		fake.SetPermission(repoName, botUser, fakegithub.PermWrite)
		env["AGENTOS_GITHUB_TOKEN"] = botTok
		botActors = []string{botUser}
		secrets = append(secrets, botTok)
	}

	// The model.
	model := fakemodel.Start(t, fakemodel.Options{Key: modelKey, Model: modelName, IgnoreResponseFormat: sc.ignoreFormat, Seed: 1})
	env["OPENAI_BASE_URL"] = model.URL()

	// The bot, as its own process.
	bot := startServe(ctx, t, bin, env)
	defer bot.stop(t)
	fake.DeliverTo(bot.url+"/webhook", []byte(secret))

	alice, err := github.New(github.Config{BaseURL: srv.URL + sc.apiPath, Token: aliceTok})
	if err != nil {
		t.Fatal(err)
	}
	issue := fake.AddIssue(repoName, fakegithub.Issue{Title: demo.Prompt, User: maintainer, Body: "`go test ./...` fails: CheckToken accepts a prefix of the token."})
	if _, err := alice.CreateComment(ctx, github.Repo{Owner: owner, Name: name}, issue, "/agent "+demo.Prompt); err != nil {
		t.Fatal(err)
	}

	// A draft PR with the bot's approval request (a COMMENT review).
	var pr fakegithub.PullRequest
	bot.waitFor(ctx, t, fake, "a draft PR with an approval request", func() bool {
		for _, p := range fake.PRs(repoName) {
			for _, r := range fake.Reviews(repoName, p.Number) {
				if isBot(r.User, botActors) && r.State == "COMMENTED" {
					pr = p
					return true
				}
			}
		}
		return false
	})
	if !pr.Draft || !strings.HasPrefix(pr.Head, "agent/") {
		t.Fatalf("the PR is not a draft on a session branch: %+v", pr)
	}
	sessionID := strings.TrimPrefix(pr.Head, "agent/")

	// The maintainer approves with a review.
	if _, _, err := alice.GitHub().PullRequests.CreateReview(ctx, owner, name, pr.Number, &gh.PullRequestReviewRequest{CommitID: gh.String(pr.HeadSHA), Event: gh.String("APPROVE"), Body: gh.String("Looks right.")}); err != nil {
		t.Fatal(err)
	}
	bot.waitFor(ctx, t, fake, "the PR to be marked ready", func() bool {
		p, ok := fake.PR(repoName, pr.Number)
		return ok && !p.Draft
	})
	bot.waitFor(ctx, t, fake, `the "run completed" log line`, func() bool { return strings.Contains(bot.logs(), `msg="run completed"`) })

	// The committed log verifies, and is the whole story.
	raw := gitShow(ctx, t, bare, "agent-sessions:sessions/"+sessionID+"/events.jsonl")
	rep, err := replay.VerifyReader(schemas.MustDefault(), bytes.NewReader(raw))
	if err != nil || !rep.Valid {
		t.Fatalf("the committed log does not verify: %v %+v", err, rep.Problem)
	}
	evs := decodeLog(t, raw)
	var repairs int
	terminal := ""
	for _, e := range evs {
		switch e.Type {
		case event.RoleOutputRepaired:
			repairs++
		case event.TurnTerminal:
			terminal = event.FieldString(e.Payload, "status")
		}
	}
	if terminal != "completed" {
		t.Errorf("the log's terminal report is %q, want completed", terminal)
	}
	if sc.ignoreFormat && repairs == 0 {
		t.Error("the model ignored response_format, yet the log has no role.output_repaired event")
	}
	if !sc.ignoreFormat && repairs != 0 {
		t.Errorf("%d repairs although the model honoured response_format", repairs)
	}
	// The fix is on the session branch.
	if src := gitShow(ctx, t, bare, pr.Head+":auth.go"); !bytes.Contains(src, []byte("ConstantTimeCompare")) {
		t.Errorf("the session branch's auth.go is not fixed:\n%s", src)
	}

	// GitHub saw nothing the real one would refuse, within the budget.
	fake.CheckNoViolations(t)
	calls := map[string]int{}
	for _, a := range botActors {
		for k, n := range fake.CallsBy(a) {
			calls[k] += n
		}
	}
	total := 0
	for _, n := range calls {
		total += n
	}
	t.Logf("the bot's GitHub API calls (%s):\n%s", sc.name, fakegithub.FormatCalls(calls))
	limit := budget
	if sc.app {
		limit = appBudget
		if n := calls["POST /repos/{owner}/{repo}/git/commits"]; n == 0 {
			t.Error("in App mode the session branch was not published through the Git Data API")
		}
	}
	if total > limit {
		t.Errorf("the bot made %d REST + GraphQL calls for one flow, budget %d", total, limit)
	}
	if n := calls["GET /repos/{owner}/{repo}/installation"]; n != 0 {
		t.Errorf("the bot looked its installation up %d times: every webhook carries it", n)
	}
	if errs := fake.DeliveryErrors(); len(errs) != 0 {
		t.Errorf("deliveries the bot refused: %v", errs)
	}

	// What an operator sees at the default level.
	logs := bot.logs()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a secret (%.6s…) is in the server's log", s)
		}
	}
	for _, want := range []string{"provider openai, model m (AGENTOS_MODEL)", `msg="run paused for approval"`, `msg="run completed"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the server's log lacks %q", want)
		}
	}
	if st := model.Stats(); st.Completions == 0 {
		t.Error("the model server answered no completion")
	}
}

// aliceTok is the maintainer's token on the fake GitHub.
const aliceTok = "ghp_e2eMaintainerToken0000000000000000"

// startGitHub serves the strict fake GitHub (closed when the test ends)
// with a repository holding the demo's buggy module and a maintainer,
// alice, with aliceTok; bare is the repository's git directory.
func startGitHub(ctx context.Context, t *testing.T) (fake *fakegithub.Fake, srv *fakegithub.Server, bare string) {
	t.Helper()
	fake = fakegithub.New(t)
	srv, err := fakegithub.Start(fake)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	files, err := sampleFiles()
	if err != nil {
		t.Fatal(err)
	}
	if bare, err = fake.AddGitRepo(ctx, fakegithub.Repo{Owner: owner, Name: name}, t.TempDir(), files); err != nil {
		t.Fatal(err)
	}
	fake.AddToken(aliceTok, maintainer)
	fake.SetPermission(repoName, maintainer, fakegithub.PermMaintain)
	return fake, srv, bare
}

// isBot reports whether login is one of the bot's identities.
func isBot(login string, actors []string) bool {
	for _, a := range actors {
		if strings.EqualFold(login, a) {
			return true
		}
	}
	return false
}

// sampleFiles is the demo's buggy module as path → content.
func sampleFiles() (map[string]string, error) {
	dir, err := os.MkdirTemp("", "agentos-sample-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := demo.WriteSample(dir); err != nil {
		return nil, err
	}
	files := map[string]string{}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	return files, err
}

func gitShow(ctx context.Context, t *testing.T, bare, object string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, "git", "--git-dir", bare, "show", object)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git show %s: %v: %s", object, err, errb.String())
	}
	return out.Bytes()
}

func decodeLog(t *testing.T, raw []byte) []event.Event {
	t.Helper()
	var evs []event.Event
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		e, err := event.ParseLine(sc.Bytes())
		if err != nil {
			t.Fatalf("log line: %v", err)
		}
		evs = append(evs, e)
	}
	return evs
}

// serveProc is `agentos serve` running as a child process.
type serveProc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	out  bytes.Buffer
	done chan error
}

func (p *serveProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *serveProc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

var listening = regexp.MustCompile(`msg="server: listening" addr=(127\.0\.0\.1:\d+)`)

// startServe starts `agentos serve` on a free loopback port with only the
// environment a user would give it (plus what Go's toolchain needs to run
// the sample's tests), and waits until it listens.
func startServe(ctx context.Context, t *testing.T, bin string, vars map[string]string) *serveProc {
	t.Helper()
	return startServeIn(ctx, t, bin, vars, t.TempDir())
}

// sandboxGoCache is the Go build cache the sandboxed `go test` runs of
// every started process share: AGENTOS_SANDBOX_GO_CACHE when the caller
// set it (CI does), else the CLI's default under the user cache directory
// of this test process (the started process's HOME is a fresh temporary
// directory, so its own default would be cold). agentos serve otherwise
// keeps one cache per worktree and every session compiles the standard
// library from cold; this project's own test repositories are trusted
// alike, so they may share build outputs.
func sandboxGoCache() string {
	if v := os.Getenv(setup.EnvGoCache); v != "" {
		return v
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "agentos", "sandbox", "go-build")
	}
	return filepath.Join(os.TempDir(), "agentos-e2e-sandbox-go-build")
}

// startServeIn is startServe over a given data directory (a restart keeps
// its predecessor's).
func startServeIn(ctx context.Context, t *testing.T, bin string, vars map[string]string, dataDir string) *serveProc {
	t.Helper()
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod"}
	// AGENTOS_LOG_LEVEL=debug reaches the bot: a chaos violation's kept
	// logs then say what each process did.
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT", "CI", "TMPDIR", "AGENTOS_LOG_LEVEL"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	if os.Getenv("GOCACHE") == "" {
		out, err := exec.Command("go", "env", "GOCACHE").Output()
		if err == nil {
			env = append(env, "GOCACHE="+strings.TrimSpace(string(out)))
		}
	}
	env = append(env, setup.EnvGoCache+"="+sandboxGoCache())
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	p := &serveProc{done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", dataDir)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := listening.FindStringSubmatch(p.logs()); m != nil {
			p.url = "http://" + m[1]
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("agentos serve exited before listening: %v\n%s", err, p.logs())
		case <-ctx.Done():
			t.Fatalf("agentos serve did not listen:\n%s", p.logs())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.cmd.Process.Kill()
			t.Fatalf("agentos serve did not listen within a minute:\n%s", p.logs())
		}
	}
}

// stop sends SIGTERM, as a service manager would, and expects a clean
// exit.
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("agentos serve exited with %v after SIGTERM\n%s", err, tail(p.logs(), 4000))
		}
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		t.Errorf("agentos serve did not stop within 30 s of SIGTERM")
	}
	if t.Failed() || os.Getenv("E2E_SHOW_LOG") != "" {
		t.Logf("agentos serve's log:\n%s", tail(p.logs(), 20000))
	}
}

// waitFor polls ok until it holds, failing with the server's log when the
// bot stops or the deadline passes.
func (p *serveProc) waitFor(ctx context.Context, t *testing.T, fake *fakegithub.Fake, what string, ok func() bool) {
	t.Helper()
	for !ok() {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("agentos serve exited (%v) while waiting for %s:\n%s", err, what, tail(p.logs(), 20000))
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; delivery errors %v; violations %v\n%s", what, fake.DeliveryErrors(), fake.Violations(), tail(p.logs(), 20000))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

var _ io.Writer = (*serveProc)(nil)
