package config

import (
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/worktree"
)

// Limits Validate enforces.
const (
	MaxWebhookSecrets = 2 // the current secret and the one being rotated out
	MinAPITokenLen    = 16
	maxWorkers        = 64
)

// reservedPaths are the API's own routes; the webhook path must not
// shadow them.
var reservedPaths = []string{"/v1", "/healthz", "/readyz", "/metrics"}

// login is a GitHub login: alphanumerics and single hyphens, at most 39
// characters; a bot's login ends in [bot].
var replicaID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

var (
	login    = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}$`)
	botLogin = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}(?:\[bot\])?$`)
)

// Validate checks every setting and returns a *ValidationError listing all
// problems, or nil.
func (c Config) Validate() error {
	var probs []*FieldError
	bad := func(field, format string, args ...any) {
		probs = append(probs, &FieldError{Field: field, Source: c.source(field), Problem: fmt.Sprintf(format, args...)})
	}

	if host, port, err := net.SplitHostPort(c.Addr); err != nil {
		bad("addr", "%q is not host:port (e.g. 127.0.0.1:8080, or :8080 for every interface)", c.Addr)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		bad("addr", "port %q is not a number from 0 to 65535", port)
	} else if strings.ContainsAny(host, " /") {
		bad("addr", "host %q is not a host name or IP address", host)
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("data_dir", "is empty: the embedded store needs a directory")
	}
	if c.StoreURL != "" && !IsPostgresURL(c.StoreURL) {
		bad("store", "%q is not a postgres:// or postgresql:// URL (leave it unset for the embedded SQLite store)", RedactURL(c.StoreURL))
	}
	if c.ReplicaID != "" && !replicaID.MatchString(c.ReplicaID) {
		bad("replica_id", "%q must be 1-64 letters, digits, '.', '_' or '-'", c.ReplicaID)
	}
	if _, err := sandbox.ParseMode(c.Sandbox); err != nil {
		bad("sandbox", "%q is not auto, bwrap, landlock or none", c.Sandbox)
	}

	switch p := c.WebhookPath; {
	case !strings.HasPrefix(p, "/"):
		bad("webhook_path", "%q must start with /", p)
	case path.Clean(p) != p || strings.ContainsAny(p, " ?#:*"):
		bad("webhook_path", "%q is not a clean URL path (like /webhook)", p)
	case p == "/":
		bad("webhook_path", "must not be / (it would shadow the API)")
	default:
		for _, r := range reservedPaths {
			if p == r || strings.HasPrefix(p, r+"/") {
				bad("webhook_path", "%q collides with the API route %s", p, r)
			}
		}
	}

	if t := c.TriggerWord; t == "" || strings.ContainsAny(t, " \t\r\n") || len(t) > 32 {
		bad("trigger", "%q must be one word of at most 32 characters (like /agent)", t)
	}
	for _, u := range c.AllowedUsers {
		if !login.MatchString(u) {
			bad("allowed_users", "%q is not a GitHub user login", u)
		}
	}
	for _, b := range c.AllowedBots {
		if !botLogin.MatchString(b) {
			bad("allowed_bots", "%q is not a GitHub bot login (like dependabot[bot])", b)
		}
	}
	if c.BotLogin != "" && !botLogin.MatchString(c.BotLogin) {
		bad("bot_login", "%q is not a GitHub login (like my-app[bot])", c.BotLogin)
	}
	if c.CommitAuthor != "" {
		if _, _, err := ParseAuthor(c.CommitAuthor); err != nil {
			bad("commit_author", "%v", err)
		}
	}
	if msg := checkBranch(c.ArtifactBranch); msg != "" {
		bad("artifact_branch", "%q %s", c.ArtifactBranch, msg)
	}
	if err := worktree.CheckBranchPrefix(c.BranchPrefix); err != nil {
		bad("branch_prefix", "%v", err)
	}
	for _, r := range c.RepoRoots {
		if !filepath.IsAbs(r) || filepath.Clean(r) != r {
			bad("repo_roots", "%q must be a clean absolute directory path", r)
		}
	}
	if c.Workers < 1 || c.Workers > maxWorkers {
		bad("workers", "%d must be from 1 to %d", c.Workers, maxWorkers)
	}
	if c.MaxRuns < 1 || c.MaxRuns > maxWorkers {
		bad("max_runs", "%d must be from 1 to %d", c.MaxRuns, maxWorkers)
	}
	if c.SSEKeepAlive < time.Second || c.SSEKeepAlive > 10*time.Minute {
		bad("sse_keepalive", "%s must be from 1s to 10m (proxies drop idle streams after about a minute)", c.SSEKeepAlive)
	}
	if c.GitHubAPIURL != "" {
		u, err := url.Parse(c.GitHubAPIURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("github_api_url", "%q is not an http(s) URL (GitHub Enterprise Server: https://HOST/api/v3/)", c.GitHubAPIURL)
		}
	}

	if len(c.WebhookSecrets) > MaxWebhookSecrets {
		bad("webhook_secret", "%d secrets given; at most %d (the new one and the one being rotated out)", len(c.WebhookSecrets), MaxWebhookSecrets)
	}
	for i, s := range c.WebhookSecrets {
		if s == "" {
			bad("webhook_secret", "entry %d of the comma-separated list is empty", i+1)
		}
	}
	if c.APIToken != "" && len(c.APIToken) < MinAPITokenLen {
		bad("api_token", "is %d characters; use at least %d random characters (e.g. openssl rand -hex 32)", len(c.APIToken), MinAPITokenLen)
	}

	app := c.GitHubAppID != 0 || len(c.GitHubPrivateKey) > 0
	switch {
	case app && c.GitHubToken != "":
		bad("github_token", "both a token and a GitHub App are configured (app id from %s); configure one", c.source("github_app_id"))
	case c.GitHubAppID < 0:
		bad("github_app_id", "%d is not an app id", c.GitHubAppID)
	case c.GitHubAppID != 0 && len(c.GitHubPrivateKey) == 0:
		bad("github_private_key", "the GitHub App %d needs its private key: set %s", c.GitHubAppID, EnvPrivateKeyFile)
	case c.GitHubAppID == 0 && len(c.GitHubPrivateKey) > 0:
		bad("github_app_id", "a private key is configured but no app id: set %s", EnvAppID)
	}
	if len(c.GitHubPrivateKey) > 0 {
		if b, _ := pem.Decode(c.GitHubPrivateKey); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
			bad("github_private_key", "is not a PEM private key (GitHub gives a file starting with -----BEGIN RSA PRIVATE KEY-----)")
		}
	}

	c.validateRetention(bad)

	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	return nil
}

// ParseAuthor splits a commit identity "Name <email>"; both parts are
// required, and neither may hold < > or control characters (they would
// break the commit header).
func ParseAuthor(s string) (name, email string, err error) {
	t := strings.TrimSpace(s)
	open, close := strings.LastIndex(t, "<"), strings.LastIndex(t, ">")
	if open < 0 || close != len(t)-1 || close < open {
		return "", "", fmt.Errorf("%q is not \"Name <email>\"", s)
	}
	name, email = strings.TrimSpace(t[:open]), strings.TrimSpace(t[open+1:close])
	switch {
	case name == "" || email == "":
		return "", "", fmt.Errorf("%q needs both a name and an email, as \"Name <email>\"", s)
	case strings.ContainsAny(name, "<>") || strings.ContainsAny(email, "<> ") || !strings.Contains(email, "@"):
		return "", "", fmt.Errorf("%q is not \"Name <email>\"", s)
	case strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "", "", fmt.Errorf("%q has control characters", s)
	}
	return name, email, nil
}

// checkBranch applies git's ref-name rules (git check-ref-format) that a
// branch name can break; it returns what is wrong, or "".
func checkBranch(b string) string {
	switch {
	case b == "":
		return "is empty"
	case strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, "."):
		return "must not start with - or /, nor end with / or ."
	case strings.Contains(b, "..") || strings.Contains(b, "//") || strings.Contains(b, "@{") || strings.HasSuffix(b, ".lock"):
		return "must not contain .. // @{ nor end with .lock"
	case strings.ContainsAny(b, " ~^:?*[\\\t\n\x7f"):
		return "must not contain spaces or any of ~ ^ : ? * [ \\"
	}
	for _, part := range strings.Split(b, "/") {
		if strings.HasPrefix(part, ".") {
			return "must not have a component starting with ."
		}
	}
	return ""
}
