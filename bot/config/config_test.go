package config

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func pemKey(t *testing.T) string {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
}

func TestDefaultsAreValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	want := map[string]any{"addr": "127.0.0.1:8080", "path": "/webhook", "trigger": "/agent", "branch": "agent-sessions", "data": ".agentos"}
	got := map[string]any{"addr": c.Addr, "path": c.WebhookPath, "trigger": c.TriggerWord, "branch": c.ArtifactBranch, "data": c.DataDir}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if c.GitHubAuth() != AuthNone || c.WebhookEnabled() {
		t.Errorf("defaults: auth %s, webhook %v; want none, false", c.GitHubAuth(), c.WebhookEnabled())
	}
}

func TestParseFile(t *testing.T) {
	doc := `# operator settings
addr: 0.0.0.0:9000
data_dir: /var/lib/agentos
webhook_path: /hooks/github
trigger: /bot
allowed_users: [alice, bob-smith]
allowed_bots: ["dependabot[bot]"]
bot_login: my-app[bot]
artifact_branch: agent/sessions
workers: 4
max_runs: 3
profile: /etc/agentos/profile.yaml
policy: /etc/agentos/policy.yaml
repo_roots: [/srv/repos]
sse_keepalive: 30s
github_api_url: https://ghe.example.com/api/v3/
github_app_id: 12345
`
	c, err := Parse("agentos.yaml", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Addr, want.DataDir, want.WebhookPath, want.TriggerWord = "0.0.0.0:9000", "/var/lib/agentos", "/hooks/github", "/bot"
	want.AllowedUsers, want.AllowedBots, want.BotLogin = []string{"alice", "bob-smith"}, []string{"dependabot[bot]"}, "my-app[bot]"
	want.ArtifactBranch, want.Workers, want.MaxRuns = "agent/sessions", 4, 3
	want.ProfileFile, want.PolicyFile, want.SSEKeepAlive = "/etc/agentos/profile.yaml", "/etc/agentos/policy.yaml", 30*time.Second
	want.RepoRoots = []string{"/srv/repos"}
	want.GitHubAPIURL, want.GitHubAppID = "https://ghe.example.com/api/v3/", 12345
	c.src, want.src = nil, nil
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got\n%+v\nwant\n%+v", c, want)
	}
}

func TestParseEmptyKeepsDefaults(t *testing.T) {
	for _, doc := range []string{"", "# nothing\n", "~\n"} {
		c, err := Parse("c.yaml", strings.NewReader(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if c.Addr != Default().Addr || c.Workers != Default().Workers {
			t.Errorf("%q: got %+v", doc, c)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, doc  string
		line, col  int
		key, inMsg string
		secretEnv  string
	}{
		{"unknown key", "addr: :80\nworkerz: 3\n", 2, 1, "workerz", "unknown key \"workerz\"", ""},
		{"wrong type", "workers: many\n", 1, 10, "workers", "whole number", ""},
		{"bad duration", "sse_keepalive: soon\n", 1, 16, "sse_keepalive", "duration", ""},
		{"list expected", "allowed_users: alice\n", 1, 16, "allowed_users", "list of strings", ""},
		{"duplicate", "addr: :80\naddr: :81\n", 2, 1, "addr", "set twice (first on line 1)", ""},
		{"not a mapping", "- a\n- b\n", 1, 1, "", "mapping", ""},
		{"syntax", "addr: [\n", 1, 1, "", "did not find expected node content", ""},
		{"webhook secret", "addr: :80\nwebhook_secret: s3cret\n", 2, 1, "webhook_secret", "", "AGENTOS_WEBHOOK_SECRET"},
		{"github token", "github_token: ghp_x\n", 1, 1, "github_token", "", "AGENTOS_GITHUB_TOKEN"},
		{"api token", "  \napi_token: x\n", 2, 1, "api_token", "", "AGENTOS_API_TOKEN"},
		{"private key", "private_key: |\n  -----BEGIN\n", 1, 1, "private_key", "", "AGENTOS_GITHUB_PRIVATE_KEY_FILE"},
		{"secret-looking", "slack_token: x\n", 1, 1, "slack_token", "", "AGENTOS_*"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("agentos.yaml", strings.NewReader(tc.doc))
			if err == nil {
				t.Fatal("no error")
			}
			if tc.secretEnv != "" {
				var se *SecretInFileError
				if !errors.As(err, &se) {
					t.Fatalf("got %T %v, want *SecretInFileError", err, err)
				}
				if se.Line != tc.line || se.Column != tc.col || se.Key != tc.key || !strings.Contains(se.Env, tc.secretEnv) {
					t.Errorf("got %+v, want line %d col %d key %s env %s", se, tc.line, tc.col, tc.key, tc.secretEnv)
				}
				if msg := err.Error(); !strings.Contains(msg, "never read from the config file") || strings.Contains(msg, "s3cret") {
					t.Errorf("message %q: must say why and must not echo the secret", msg)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("got %T %v, want *ParseError", err, err)
			}
			if pe.Line != tc.line || pe.Column != tc.col || pe.Key != tc.key || !strings.Contains(pe.Msg, tc.inMsg) {
				t.Errorf("got %+v (%v), want line %d col %d key %q msg containing %q", pe, err, tc.line, tc.col, tc.key, tc.inMsg)
			}
			if !strings.HasPrefix(err.Error(), "agentos.yaml:") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestApplyEnv(t *testing.T) {
	key := pemKey(t)
	keyFile := writeFile(t, "app.pem", key)
	secretFile := writeFile(t, "secret", "old-secret\nnew-secret\n")
	cases := []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"nothing", nil, func(t *testing.T, c Config) {
			if c.GitHubAuth() != AuthNone || c.APIToken != "" || len(c.WebhookSecrets) != 0 {
				t.Errorf("got %+v", c)
			}
		}},
		{"rotation pair", map[string]string{EnvWebhookSecret: " new , old "}, func(t *testing.T, c Config) {
			if want := []string{"new", "old"}; !reflect.DeepEqual(c.WebhookSecrets, want) {
				t.Errorf("got %q, want %q", c.WebhookSecrets, want)
			}
		}},
		{"secret from file", map[string]string{"AGENTOS_WEBHOOK_SECRET_FILE": secretFile}, func(t *testing.T, c Config) {
			if want := []string{"old-secret", "new-secret"}; !reflect.DeepEqual(c.WebhookSecrets, want) {
				t.Errorf("got %q, want %q", c.WebhookSecrets, want)
			}
		}},
		{"token", map[string]string{EnvGitHubToken: "ghp_a", EnvGitHubTokenStd: "ghs_b"}, func(t *testing.T, c Config) {
			if c.GitHubToken != "ghp_a" || c.GitHubAuth() != AuthToken {
				t.Errorf("got %q %s", c.GitHubToken, c.GitHubAuth())
			}
		}},
		{"GITHUB_TOKEN fallback", map[string]string{EnvGitHubTokenStd: "ghs_b"}, func(t *testing.T, c Config) {
			if c.GitHubToken != "ghs_b" || c.source("github_token") != "env GITHUB_TOKEN" {
				t.Errorf("got %q from %s", c.GitHubToken, c.source("github_token"))
			}
		}},
		{"app wins over GITHUB_TOKEN fallback", map[string]string{EnvGitHubTokenStd: "ghs_b", EnvAppID: "42", EnvPrivateKeyFile: keyFile}, func(t *testing.T, c Config) {
			if c.GitHubToken != "" || c.GitHubAuth() != AuthApp || c.GitHubAppID != 42 || string(c.GitHubPrivateKey) != key {
				t.Errorf("got token %q auth %s id %d key %d bytes", c.GitHubToken, c.GitHubAuth(), c.GitHubAppID, len(c.GitHubPrivateKey))
			}
		}},
		{"data and api url", map[string]string{EnvData: "/srv/agentos", EnvAPIURL: "https://ghe.local/api/v3/", EnvAPIToken: "0123456789abcdef"}, func(t *testing.T, c Config) {
			if c.DataDir != "/srv/agentos" || c.GitHubAPIURL != "https://ghe.local/api/v3/" || c.APIToken != "0123456789abcdef" {
				t.Errorf("got %+v", c)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			if err := c.ApplyEnv(env(tc.env)); err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestApplyEnvErrors(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		wantVar string
		wantErr error
	}{
		{"both direct and file", map[string]string{EnvAPIToken: "x", "AGENTOS_API_TOKEN_FILE": "/f"}, EnvAPIToken, ErrAmbiguous},
		{"missing file", map[string]string{"AGENTOS_WEBHOOK_SECRET_FILE": "/nonexistent/secret"}, "AGENTOS_WEBHOOK_SECRET_FILE", os.ErrNotExist},
		{"missing key file", map[string]string{EnvAppID: "1", EnvPrivateKeyFile: "/nonexistent/key.pem"}, "github_private_key_file (env AGENTOS_GITHUB_PRIVATE_KEY_FILE)", os.ErrNotExist},
		{"key twice", map[string]string{EnvPrivateKey: "-----BEGIN", EnvPrivateKeyFile: "/k.pem"}, EnvPrivateKey, nil},
		{"app id not a number", map[string]string{EnvAppID: "my-app"}, EnvAppID, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			err := c.ApplyEnv(env(tc.env))
			var ee *EnvError
			if !errors.As(err, &ee) {
				t.Fatalf("got %T %v, want *EnvError", err, err)
			}
			if ee.Var != tc.wantVar {
				t.Errorf("var %q, want %q", ee.Var, tc.wantVar)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("got %v, want it to wrap %v", err, tc.wantErr)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	key := []byte(pemKey(t))
	cases := []struct {
		name  string
		edit  func(c *Config)
		field string // "" means valid
		inMsg string
	}{
		{"defaults", func(c *Config) {}, "", ""},
		{"token only", func(c *Config) { c.GitHubToken = "ghp_x" }, "", ""},
		{"app only", func(c *Config) { c.GitHubAppID, c.GitHubPrivateKey = 7, key }, "", ""},
		{"two secrets", func(c *Config) { c.WebhookSecrets = []string{"a", "b"} }, "", ""},
		{"any interface", func(c *Config) { c.Addr = ":8080" }, "", ""},
		{"port 0", func(c *Config) { c.Addr = "127.0.0.1:0" }, "", ""},
		{"token and app", func(c *Config) { c.GitHubToken, c.GitHubAppID, c.GitHubPrivateKey = "ghp_x", 7, key }, "github_token", "configure one"},
		{"app without key", func(c *Config) { c.GitHubAppID = 7 }, "github_private_key", EnvPrivateKeyFile},
		{"key without app", func(c *Config) { c.GitHubPrivateKey = key }, "github_app_id", EnvAppID},
		{"key not PEM", func(c *Config) { c.GitHubAppID, c.GitHubPrivateKey = 7, []byte("ssh-rsa AAAA") }, "github_private_key", "PEM"},
		{"three secrets", func(c *Config) { c.WebhookSecrets = []string{"a", "b", "c"} }, "webhook_secret", "at most 2"},
		{"empty secret", func(c *Config) { c.WebhookSecrets = []string{"a", ""} }, "webhook_secret", "entry 2"},
		{"short api token", func(c *Config) { c.APIToken = "abc" }, "api_token", "at least 16"},
		{"addr without port", func(c *Config) { c.Addr = "localhost" }, "addr", "host:port"},
		{"addr bad port", func(c *Config) { c.Addr = "localhost:http2" }, "addr", "port"},
		{"empty data", func(c *Config) { c.DataDir = " " }, "data_dir", "empty"},
		{"relative webhook path", func(c *Config) { c.WebhookPath = "webhook" }, "webhook_path", "start with /"},
		{"webhook path shadows api", func(c *Config) { c.WebhookPath = "/v1/hook" }, "webhook_path", "/v1"},
		{"webhook path metrics", func(c *Config) { c.WebhookPath = "/metrics" }, "webhook_path", "collides"},
		{"webhook path unclean", func(c *Config) { c.WebhookPath = "/a/../b" }, "webhook_path", "clean"},
		{"trigger with space", func(c *Config) { c.TriggerWord = "/my agent" }, "trigger", "one word"},
		{"bad user", func(c *Config) { c.AllowedUsers = []string{"alice", "-bob"} }, "allowed_users", "-bob"},
		{"bot in bots", func(c *Config) { c.AllowedBots = []string{"renovate[bot]"} }, "", ""},
		{"bad bot", func(c *Config) { c.AllowedBots = []string{"re novate"} }, "allowed_bots", "bot login"},
		{"bad bot login", func(c *Config) { c.BotLogin = "me[app]" }, "bot_login", "login"},
		{"bad branch", func(c *Config) { c.ArtifactBranch = "agent..sessions" }, "artifact_branch", ".."},
		{"branch with space", func(c *Config) { c.ArtifactBranch = "agent sessions" }, "artifact_branch", "spaces"},
		{"zero workers", func(c *Config) { c.Workers = 0 }, "workers", "from 1"},
		{"too many runs", func(c *Config) { c.MaxRuns = 1000 }, "max_runs", "from 1"},
		{"keepalive too short", func(c *Config) { c.SSEKeepAlive = time.Millisecond }, "sse_keepalive", "1s"},
		{"api url", func(c *Config) { c.GitHubAPIURL = "ghe.local/api" }, "github_api_url", "http(s)"},
		{"repo roots", func(c *Config) { c.RepoRoots = []string{"/srv/repos", "/home/ci/work"} }, "", ""},
		{"relative repo root", func(c *Config) { c.RepoRoots = []string{"repos"} }, "repo_roots", "absolute"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.edit(&c)
			err := c.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %T %v, want *ValidationError", err, err)
			}
			fe := ve.Field(tc.field)
			if fe == nil {
				t.Fatalf("no problem with %s in %v", tc.field, err)
			}
			if !strings.Contains(fe.Problem, tc.inMsg) {
				t.Errorf("problem %q does not mention %q", fe.Problem, tc.inMsg)
			}
			var one *FieldError
			if !errors.As(err, &one) {
				t.Error("errors.As cannot reach the *FieldError")
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default()
	c.Workers, c.Addr, c.TriggerWord = 0, "nope", ""
	var ve *ValidationError
	if !errors.As(c.Validate(), &ve) || len(ve.Problems) != 3 {
		t.Fatalf("got %v, want 3 problems", c.Validate())
	}
}

func TestFlagsLoadPrecedence(t *testing.T) {
	file := writeFile(t, "agentos.yaml", "addr: 127.0.0.1:7000\ndata_dir: /from/file\nworkers: 3\n")
	cases := []struct {
		name     string
		args     []string
		env      map[string]string
		addr     string
		data     string
		addrFrom string
	}{
		{"defaults", nil, nil, "127.0.0.1:8080", ".agentos", "default"},
		{"file", []string{"--config", file}, nil, "127.0.0.1:7000", "/from/file", file + ":1"},
		{"env over file", []string{"--config", file}, map[string]string{EnvData: "/from/env"}, "127.0.0.1:7000", "/from/env", file + ":1"},
		{"flags over env", []string{"--config", file, "--addr", "127.0.0.1:0", "--data", "/from/flag"}, map[string]string{EnvData: "/from/env"}, "127.0.0.1:0", "/from/flag", "--addr"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			f := BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			c, err := f.Load(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.Addr != tc.addr || c.DataDir != tc.data || c.source("addr") != tc.addrFrom {
				t.Errorf("got addr %s (from %s) data %s; want %s (from %s) %s", c.Addr, c.source("addr"), c.DataDir, tc.addr, tc.addrFrom, tc.data)
			}
		})
	}
}

func TestFlagsLoadNamesTheSource(t *testing.T) {
	file := writeFile(t, "agentos.yaml", "\nworkers: 0\n")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := BindFlags(fs)
	if err := fs.Parse([]string{"--config", file, "--addr", "bad"}); err != nil {
		t.Fatal(err)
	}
	_, err := f.Load(env(nil))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	for _, want := range []string{"workers (from " + file + ":2)", "addr (from --addr)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}

func TestFlagsLoadMissingFile(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	f := BindFlags(fs)
	if err := fs.Parse([]string{"--config", filepath.Join(t.TempDir(), "none.yaml")}); err != nil {
		t.Fatal(err)
	}
	var pe *ParseError
	if _, err := f.Load(env(nil)); !errors.As(err, &pe) {
		t.Fatalf("got %v, want *ParseError", err)
	}
}

func TestLogValueHidesSecrets(t *testing.T) {
	c := Default()
	c.APIToken, c.GitHubToken, c.WebhookSecrets = "api-token-0123456789", "ghp_supersecret", []string{"hook-secret"}
	var b strings.Builder
	slog.New(slog.NewTextHandler(&b, nil)).Info("config", "config", c)
	out := b.String()
	for _, s := range []string{"api-token-0123456789", "ghp_supersecret", "hook-secret"} {
		if strings.Contains(out, s) {
			t.Errorf("log %q leaks %q", out, s)
		}
	}
	for _, want := range []string{"config.api_token=set", "config.github_auth=token", "config.webhook_secrets=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
}

// TestExampleFile keeps the documented example in step with the parser:
// it parses, validates with a key for the app, and names every key.
func TestExampleFile(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := Parse("example.yaml", f)
	if err != nil {
		t.Fatal(err)
	}
	c.GitHubPrivateKey = []byte(pemKey(t))
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, k := range knownKeys() {
		if c.source(k) == "default" {
			t.Errorf("the example does not show %q", k)
		}
	}
}

func TestParseAuthor(t *testing.T) {
	tests := []struct {
		in, name, email string
		wantErr         bool
	}{
		{"Mona Lisa <mona@example.com>", "Mona Lisa", "mona@example.com", false},
		{"  agentos <1+agentos[bot]@users.noreply.github.com> ", "agentos", "1+agentos[bot]@users.noreply.github.com", false},
		{"mona@example.com", "", "", true},
		{"<mona@example.com>", "", "", true},
		{"Mona <>", "", "", true},
		{"Mona <not-an-email>", "", "", true},
		{"Mona <a@b> trailing", "", "", true},
		{"Mo<na <a@b>", "", "", true},
		{"Mona\n <a@b>", "", "", true},
	}
	for _, tt := range tests {
		name, email, err := ParseAuthor(tt.in)
		if (err != nil) != tt.wantErr || name != tt.name || email != tt.email {
			t.Errorf("ParseAuthor(%q) = %q, %q, %v; want %q, %q, error %v", tt.in, name, email, err, tt.name, tt.email, tt.wantErr)
		}
	}
	c := Default()
	c.CommitAuthor = "no brackets"
	var ve *ValidationError
	if err := c.Validate(); !errors.As(err, &ve) || ve.Field("commit_author") == nil {
		t.Errorf("Validate with a bad commit_author = %v, want a commit_author problem", err)
	}
	c = Default()
	if err := c.ApplyEnv(func(k string) string {
		if k == EnvCommitAuthor {
			return "Bot <bot@example.com>"
		}
		return ""
	}); err != nil || c.CommitAuthor != "Bot <bot@example.com>" {
		t.Errorf("ApplyEnv: %q, %v", c.CommitAuthor, err)
	}
}

// TestSandboxSetting: the file key, the environment (which wins) and the
// validation of the mode.
func TestSandboxSetting(t *testing.T) {
	if Default().Sandbox != "auto" {
		t.Fatalf("default sandbox %q, want auto", Default().Sandbox)
	}
	c, err := Parse("c.yaml", strings.NewReader("sandbox: landlock\n"))
	if err != nil || c.Sandbox != "landlock" {
		t.Fatalf("file: %q %v", c.Sandbox, err)
	}
	if err := c.ApplyEnv(func(k string) string {
		if k == EnvSandbox {
			return "none"
		}
		return ""
	}); err != nil || c.Sandbox != "none" || c.source("sandbox") != "env "+EnvSandbox {
		t.Fatalf("env: %q from %s, %v", c.Sandbox, c.source("sandbox"), err)
	}
	c.Sandbox = "docker"
	var ve *ValidationError
	if err := c.Validate(); !errors.As(err, &ve) || ve.Field("sandbox") == nil {
		t.Fatalf("Validate accepted sandbox %q: %v", c.Sandbox, err)
	}
}

// TestBranchPrefixValidated: branch_prefix is checked with git's rules
// and the bot's, and a refusal names the key.
func TestBranchPrefixValidated(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		ok     bool
	}{{"agent/", true}, {"claude/", true}, {"bots-", true}, {"a..b/", false}, {"bot2", false}, {"a b/", false}, {"", false}} {
		c := Default()
		c.GitHubToken = "t"
		c.WebhookSecrets = []string{"s"}
		c.BranchPrefix = tc.prefix
		err := c.Validate()
		if tc.ok && err != nil && strings.Contains(err.Error(), "branch_prefix") {
			t.Errorf("%q: %v", tc.prefix, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "branch_prefix")) {
			t.Errorf("%q: %v, want a branch_prefix error", tc.prefix, err)
		}
	}
}
