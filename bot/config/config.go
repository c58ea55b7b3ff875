// Package config owns the configuration of `agentos serve`: the defaults
// (one function), the YAML file (parsed from an io.Reader; unknown keys and
// secrets are errors with their position), the environment (the only place
// secrets come from, directly or through *_FILE variables), the command-line
// flags, and Validate, which reports every problem at once as typed errors.
//
// Precedence, lowest first: Default, the file (--config), the environment,
// flags given on the command line.
//
// GitHub credentials are optional. Without a token or an app the server
// still verifies, records and queues webhook deliveries and serves the HTTP
// API, but it cannot act on GitHub: it cannot check a commenter's
// collaborator permission (so no command is authorized), post the tracking
// comment or review, push the session branch, or open the pull request.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel/worktree"
)

// Config is the server's configuration.
type Config struct {
	// Addr is the listen address (host:port), --addr / addr.
	Addr string
	// DataDir is the embedded store's directory, --data / data_dir /
	// AGENTOS_DATA.
	DataDir string
	// WebhookPath is where GitHub delivers webhooks (webhook_path).
	WebhookPath string
	// TriggerWord starts a command in a comment (trigger).
	TriggerWord string
	// AllowedUsers, when non-empty, limits who may command the bot
	// (allowed_users); permissions are still checked on GitHub.
	AllowedUsers []string
	// AllowedBots lists bot accounts whose comments are not ignored
	// (allowed_bots); every other bot is ignored.
	AllowedBots []string
	// BotLogin overrides the bot's own login, learned from GitHub
	// otherwise (bot_login).
	BotLogin string
	// CommitAuthor, "Name <email>", signs the session commits
	// (commit_author / AGENTOS_COMMIT_AUTHOR). Empty: the bot's own GitHub
	// account with its noreply address — the token's user in token mode,
	// <app-slug>[bot] in App mode. Set, it also makes the session branch
	// go over git: GitHub signs (Verified) only API commits that name no
	// author.
	CommitAuthor string
	// ArtifactBranch is the branch session logs are committed to
	// (artifact_branch).
	ArtifactBranch string
	// BranchPrefix starts the branches of new sessions (branch_prefix,
	// default agent/). Sessions begun under an earlier prefix keep their
	// branches.
	BranchPrefix string
	// LogOnSessionBranch commits session logs under .agent/sessions/<id>/
	// on each session branch instead of the artifact branch
	// (log_on_session_branch).
	LogOnSessionBranch bool
	// Workers is the number of webhook queue workers (workers).
	Workers int
	// MaxRuns bounds the runs the HTTP API executes at once (max_runs).
	MaxRuns int
	// ProfileFile is the runtime provider profile (profile).
	ProfileFile string
	// PolicyFile is the operator's kernel policy (policy).
	PolicyFile string
	// RepoRoots, when non-empty, are the directories whose subtrees the
	// HTTP API may run agents in (repo_roots); empty allows any directory
	// the server can open.
	RepoRoots []string
	// SSEKeepAlive is the interval of keep-alive comments on event streams
	// (sse_keepalive).
	SSEKeepAlive time.Duration
	// GitHubAPIURL is the REST API base URL, for GitHub Enterprise Server
	// (github_api_url / AGENTOS_GITHUB_API_URL). Empty means api.github.com.
	GitHubAPIURL string
	// GitHubAppID is the GitHub App's id (github_app_id /
	// AGENTOS_GITHUB_APP_ID).
	GitHubAppID int64
	// GitHubPrivateKeyFile is the path of the app's PEM private key
	// (github_private_key_file / AGENTOS_GITHUB_PRIVATE_KEY_FILE).
	GitHubPrivateKeyFile string
	// Sandbox is how commands the agent runs are confined (sandbox /
	// AGENTOS_SANDBOX): auto (bubblewrap, else Landlock, else commands
	// are refused), bwrap, landlock, or none — repository code then runs
	// with the server's own reach, and every tracking comment says so.
	Sandbox string
	// SandboxReadOnly are extra host paths sandboxed commands may read
	// (sandbox_readonly / AGENTOS_SANDBOX_READONLY, ':'-separated): a
	// toolchain in a place the sandbox does not find by itself.
	SandboxReadOnly []string
	// Retention is how long ended sessions and finished deliveries are
	// kept (retention: {sessions, deliveries}; retention.go).
	Retention Retention

	// Secrets: from the environment (or *_FILE) only, never from the file.

	// WebhookSecrets verify X-Hub-Signature-256; two during a rotation
	// (AGENTOS_WEBHOOK_SECRET, comma-separated).
	WebhookSecrets []string
	// GitHubToken is a personal or installation token
	// (AGENTOS_GITHUB_TOKEN, else GITHUB_TOKEN when no app is configured).
	GitHubToken string
	// GitHubPrivateKey is the app's PEM private key, read from
	// GitHubPrivateKeyFile or AGENTOS_GITHUB_PRIVATE_KEY.
	GitHubPrivateKey []byte
	// APIToken is the bearer token of the HTTP API's write endpoints
	// (AGENTOS_API_TOKEN); empty disables them.
	APIToken string
	// StoreURL selects PostgreSQL for the event store and the delivery
	// queue, shared by several replicas (--store postgres://… or
	// AGENTOS_DATABASE_URL); empty: the embedded SQLite store and log
	// queue in DataDir. It may carry a password, so it is a secret.
	StoreURL string
	// ReplicaID names this replica in the queue's claims
	// (AGENTOS_REPLICA_ID); a replica restarted under the same name
	// releases the claims it held at once. Empty: host-pid-random, and
	// the claims of a dead process expire instead.
	ReplicaID string

	// src records where each setting came from, for error messages.
	src map[string]string
}

func (c *Config) setSource(field, source string) {
	if c.src == nil {
		c.src = map[string]string{}
	}
	c.src[field] = source
}

// source says where a field's value came from.
func (c Config) source(field string) string {
	if s, ok := c.src[field]; ok {
		return s
	}
	// A nested key (retention.sessions) set in the file is recorded by
	// its mapping's key.
	if parent, _, ok := strings.Cut(field, "."); ok {
		if s, ok := c.src[parent]; ok {
			return s
		}
	}
	return "default"
}

// Default returns the defaults.
func Default() Config {
	return Config{
		Addr:           "127.0.0.1:8080",
		DataDir:        ".agentos",
		WebhookPath:    "/webhook",
		TriggerWord:    "/agent",
		ArtifactBranch: "agent-sessions",
		BranchPrefix:   worktree.DefaultBranchPrefix,
		Workers:        2,
		MaxRuns:        2,
		SSEKeepAlive:   15 * time.Second,
		Sandbox:        "auto",
		Retention:      Retention{Deliveries: DefaultDeliveryRetention},
	}
}

// Auth says how the server authenticates to GitHub.
type Auth string

// GitHub authentication modes.
const (
	AuthNone  Auth = "none"
	AuthToken Auth = "token"
	AuthApp   Auth = "app"
)

// GitHubAuth returns the configured GitHub authentication mode.
func (c Config) GitHubAuth() Auth {
	switch {
	case c.GitHubAppID != 0 || len(c.GitHubPrivateKey) > 0:
		return AuthApp
	case c.GitHubToken != "":
		return AuthToken
	}
	return AuthNone
}

// WebhookEnabled reports whether deliveries can be verified: without a
// secret the webhook route must not be mounted.
func (c Config) WebhookEnabled() bool { return len(c.WebhookSecrets) > 0 }

// LogValue implements slog.LogValuer: settings in full, secrets only as
// set or unset.
func (c Config) LogValue() slog.Value {
	set := func(ok bool) string {
		if ok {
			return "set"
		}
		return "unset"
	}
	return slog.GroupValue(
		slog.String("addr", c.Addr),
		slog.String("data_dir", c.DataDir),
		slog.String("webhook_path", c.WebhookPath),
		slog.String("trigger", c.TriggerWord),
		slog.Any("allowed_users", c.AllowedUsers),
		slog.Any("allowed_bots", c.AllowedBots),
		slog.String("bot_login", c.BotLogin),
		slog.String("commit_author", c.CommitAuthor),
		slog.String("artifact_branch", c.ArtifactBranch),
		slog.String("branch_prefix", c.BranchPrefix),
		slog.Bool("log_on_session_branch", c.LogOnSessionBranch),
		slog.Int("workers", c.Workers),
		slog.Int("max_runs", c.MaxRuns),
		slog.String("profile", c.ProfileFile),
		slog.String("policy", c.PolicyFile),
		slog.Any("repo_roots", c.RepoRoots),
		slog.Duration("sse_keepalive", c.SSEKeepAlive),
		slog.String("github_api_url", c.GitHubAPIURL),
		slog.String("github_auth", string(c.GitHubAuth())),
		slog.Int64("github_app_id", c.GitHubAppID),
		slog.Int("webhook_secrets", len(c.WebhookSecrets)),
		slog.String("api_token", set(c.APIToken != "")),
		slog.String("sandbox", c.Sandbox),
		slog.String("store", RedactURL(c.StoreURL)),
		slog.String("replica_id", c.ReplicaID),
		slog.Group("retention", slog.String("sessions", FormatRetention(c.Retention.Sessions)), slog.String("deliveries", FormatRetention(c.Retention.Deliveries))),
	)
}

// RedactURL returns a database URL with its password masked ("" stays
// "", and an unparsable value is hidden whole).
func RedactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable, hidden)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// IsPostgresURL reports whether s selects the PostgreSQL store.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// ParseError is a problem in the config file, at a position when known.
type ParseError struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Column int
	Key    string // the offending key, if any
	Msg    string
}

func (e *ParseError) Error() string {
	pos := e.File
	if e.Line > 0 {
		pos = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Column)
	}
	return pos + ": " + e.Msg
}

// SecretInFileError says the config file holds a secret. Secrets are
// read from the environment only, so that the file can be committed and
// shown in logs.
type SecretInFileError struct {
	File         string
	Line, Column int
	Key          string
	Env          string // where the secret belongs
}

func (e *SecretInFileError) Error() string {
	return fmt.Sprintf("%s:%d:%d: %q is a secret, and secrets are never read from the config file: remove it and set %s in the environment instead", e.File, e.Line, e.Column, e.Key, e.Env)
}

// FieldError is one invalid setting.
type FieldError struct {
	Field   string // the file key or flag the setting is known by
	Source  string // where the value came from: default, file, env NAME, --flag
	Problem string
}

func (e *FieldError) Error() string {
	if e.Source == "" {
		return e.Field + ": " + e.Problem
	}
	return fmt.Sprintf("%s (from %s): %s", e.Field, e.Source, e.Problem)
}

// ValidationError lists every invalid setting Validate found.
type ValidationError struct {
	Problems []*FieldError
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return "invalid configuration: " + strings.Join(msgs, "; ")
}

// Unwrap returns the problems, so errors.As finds a *FieldError.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// Field returns the problem with the named field, or nil.
func (e *ValidationError) Field(name string) *FieldError {
	for _, p := range e.Problems {
		if p.Field == name {
			return p
		}
	}
	return nil
}

// EnvError is a problem with an environment variable (e.g. an unreadable
// *_FILE or a secret given twice).
type EnvError struct {
	Var string
	Err error
}

func (e *EnvError) Error() string { return e.Var + ": " + e.Err.Error() }
func (e *EnvError) Unwrap() error { return e.Err }

// ErrAmbiguous is wrapped by an EnvError when a value is given both
// directly and through its *_FILE variable.
var ErrAmbiguous = errors.New("set both directly and through the _FILE variable; set one")
