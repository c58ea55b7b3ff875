package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/provider/fakemodel"
)

var userCodeLine = regexp.MustCompile(`one-time code: ([A-Z0-9]{4}-[A-Z0-9]{4})`)

// cli runs the agentos binary as a user with configDir as their
// configuration directory; answer, if set, is called with the user code
// the command prints (agentos login) while it waits.
type cliResult struct {
	code           int
	stdout, stderr string
}

func cli(ctx context.Context, t *testing.T, bin, configDir string, answer func(userCode string), args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"HOME=" + configDir, "XDG_CONFIG_HOME=" + configDir, "PATH=" + os.Getenv("PATH")}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	sc := bufio.NewScanner(errPipe)
	for sc.Scan() {
		line := sc.Text()
		stderr.WriteString(line + "\n")
		if m := userCodeLine.FindStringSubmatch(line); m != nil && answer != nil {
			answer(m[1])
		}
	}
	err = cmd.Wait()
	res := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("agentos %v: %v", args, err)
	}
	return res
}

// TestLoginDeviceFlowReadsARun: a maintainer signs in from a terminal
// with GitHub's device flow (agentos login against agentos serve and the
// strict fake GitHub, both real processes or servers), lists and reads the
// session the bot paused; an outsider signed in the same way sees nothing
// of it (404); a cancelled sign-in and a missing one exit 6. The token is
// stored 0600 and printed or logged nowhere.
func TestLoginDeviceFlowReadsARun(t *testing.T) {
	bin := agentosBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fake, srv, _ := startGitHub(ctx, t)
	const botTok = "ghp_e2eBotToken000000000000000000000000"
	fake.AddToken(botTok, botUser)
	fake.SetPermission(repoName, botUser, fakegithub.PermWrite)
	fake.SetPermission(repoName, "rita", fakegithub.PermRead)
	fake.AddUser("olga", "User")
	fake.AddOAuthClient(fakegithub.OAuthClient{ClientID: "Iv1.e2eapp", ClientSecret: "e2e-client-secret", CallbackURL: "http://127.0.0.1/login/callback", DeviceFlow: true})
	model := fakemodel.Start(t, fakemodel.Options{Key: modelKey, Model: modelName, Seed: 1})
	bot := startServe(ctx, t, bin, map[string]string{
		"AGENTOS_PROVIDER": "openai", "AGENTOS_MODEL": modelName, "OPENAI_API_KEY": modelKey, "OPENAI_BASE_URL": model.URL(),
		"AGENTOS_WEBHOOK_SECRET": secret, "AGENTOS_GITHUB_API_URL": srv.URL + "/api/v3", "AGENTOS_GITHUB_TOKEN": botTok,
		"AGENTOS_GITHUB_CLIENT_ID": "Iv1.e2eapp", "AGENTOS_GITHUB_CLIENT_SECRET": "e2e-client-secret",
		"AGENTOS_PUBLIC_URL": "http://127.0.0.1", "AGENTOS_VIEWER_SECRET": strings.Repeat("v", 32),
	})
	defer bot.stop(t)
	fake.DeliverTo(bot.url+"/webhook", []byte(secret))

	// The bot pauses a session of octo/app for approval.
	alice, err := github.New(github.Config{BaseURL: srv.URL + "/api/v3", Token: aliceTok})
	if err != nil {
		t.Fatal(err)
	}
	issue := fake.AddIssue(repoName, fakegithub.Issue{Title: demo.Prompt, User: maintainer, Body: "fix it"})
	if _, err := alice.CreateComment(ctx, github.Repo{Owner: owner, Name: name}, issue, "/agent "+demo.Prompt); err != nil {
		t.Fatal(err)
	}
	var sessionID string
	bot.waitFor(ctx, t, fake, "a draft PR with an approval request", func() bool {
		for _, p := range fake.PRs(repoName) {
			if p.Draft && strings.HasPrefix(p.Head, "agent/") && len(fake.Reviews(repoName, p.Number)) > 0 {
				sessionID = strings.TrimPrefix(p.Head, "agent/")
				return true
			}
		}
		return false
	})

	// rita (read permission) signs in: the code she enters on GitHub.
	rita := t.TempDir()
	r := cli(ctx, t, bin, rita, func(code string) {
		if err := fake.EnterDeviceCode("rita", code); err != nil {
			t.Errorf("entering %s: %v", code, err)
		}
	}, "login", "--server", bot.url)
	if r.code != 0 || !strings.Contains(r.stdout, "Signed in to "+bot.url+" as rita") {
		t.Fatalf("agentos login: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	credFile := filepath.Join(rita, "agentos", "credentials.json")
	st, err := os.Stat(credFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", st, err)
	}
	ritaTok := storedToken(t, credFile, bot.url)
	for what, text := range map[string]string{"login's stdout": r.stdout, "login's stderr": r.stderr, "the server's log": bot.logs()} {
		if strings.Contains(text, ritaTok) {
			t.Errorf("the token is in %s", what)
		}
	}

	r = cli(ctx, t, bin, rita, nil, "runs", "--server", bot.url)
	if r.code != 0 || !strings.Contains(r.stdout, sessionID) || !strings.Contains(r.stdout, "paused") || !strings.Contains(r.stdout, repoName) {
		t.Errorf("agentos runs: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r = cli(ctx, t, bin, rita, nil, "runs", "--server", bot.url, "--state", "completed"); r.code != 0 || strings.Contains(r.stdout, sessionID) {
		t.Errorf("agentos runs --state completed: exit %d\n%s", r.code, r.stdout)
	}
	r = cli(ctx, t, bin, rita, nil, "view", "--server", bot.url, sessionID)
	if r.code != 0 || !regexp.MustCompile(`State\s+paused`).MatchString(r.stdout) || !strings.Contains(r.stdout, "Pending") {
		t.Errorf("agentos view --server: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	// olga (no access) signs in the same way and reads nothing.
	olga := t.TempDir()
	if r = cli(ctx, t, bin, olga, func(code string) { _ = fake.EnterDeviceCode("olga", code) }, "login", "--server", bot.url); r.code != 0 {
		t.Fatalf("olga's login: exit %d\n%s", r.code, r.stderr)
	}
	if r = cli(ctx, t, bin, olga, nil, "runs", "--server", bot.url); r.code != 0 || strings.Contains(r.stdout, sessionID) {
		t.Errorf("an outsider's runs: exit %d\n%s", r.code, r.stdout)
	}
	if r = cli(ctx, t, bin, olga, nil, "view", "--server", bot.url, sessionID); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("an outsider's view: exit %d\n%s", r.code, r.stderr)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, bot.url+"/v1/runs/"+sessionID, nil)
	req.Header.Set("Authorization", "Bearer "+storedToken(t, filepath.Join(olga, "agentos", "credentials.json"), bot.url))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("an outsider's GET /v1/runs/%s: %v %v", sessionID, resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}

	// A sign-in cancelled on GitHub, and no sign-in at all: exit 6.
	nobody := t.TempDir()
	if r = cli(ctx, t, bin, nobody, func(code string) { _ = fake.CancelDeviceCode("rita", code) }, "login", "--server", bot.url); r.code != 6 || !strings.Contains(r.stderr, "cancelled") {
		t.Errorf("cancelled login: exit %d\n%s", r.code, r.stderr)
	}
	if r = cli(ctx, t, bin, nobody, nil, "runs", "--server", bot.url); r.code != 6 || !strings.Contains(r.stderr, "agentos login") {
		t.Errorf("runs without a login: exit %d\n%s", r.code, r.stderr)
	}
	fake.CheckNoViolations(t)
}

func storedToken(t *testing.T, file, server string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Servers map[string]struct {
			Token string `json:"token"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(b, &c); err != nil || !strings.HasPrefix(c.Servers[server].Token, "ghu_") {
		t.Fatalf("credentials: %v %s", err, b)
	}
	return c.Servers[server].Token
}
