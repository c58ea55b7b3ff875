package worktree

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Errors callers can branch on with errors.Is.
var (
	// ErrInvalid marks bad input: an unusable repository name, session id,
	// branch or configuration.
	ErrInvalid = errors.New("worktree: invalid input")
	// ErrNotFound marks a missing branch, pull request head or artifact.
	ErrNotFound = errors.New("worktree: not found")
	// ErrConflict marks an artifact push that kept losing the race for the
	// branch tip after every retry.
	ErrConflict = errors.New("worktree: push kept losing the race for the branch tip")
	// ErrClosed marks use of a session after Close.
	ErrClosed = errors.New("worktree: session closed")
)

// Default values of Config fields.
const (
	DefaultBaseURL        = "https://github.com"
	DefaultArtifactBranch = "agent-sessions"
	DefaultAuthorName     = "agentos[bot]"
	DefaultAuthorEmail    = "agentos[bot]@users.noreply.github.com"
	DefaultPushRetries    = 8
	// TokenUser is the basic-auth user GitHub expects with an installation
	// token as the password.
	TokenUser = "x-access-token"
)

// Backend selects how worktrees are prepared and committed.
type Backend int

const (
	// BackendAuto uses the git CLI when it is on PATH, go-git otherwise.
	BackendAuto Backend = iota
	// BackendGoGit uses go-git only.
	BackendGoGit
	// BackendCLI uses the git CLI for worktree preparation and commits and
	// fails if it is missing.
	BackendCLI
)

// Repo names a GitHub repository.
type Repo struct {
	Owner string
	Name  string
}

// String returns owner/name.
func (r Repo) String() string { return r.Owner + "/" + r.Name }

var repoPartRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)

// Validate reports whether r can name a mirror directory and a remote URL.
func (r Repo) Validate() error {
	for _, p := range []string{r.Owner, r.Name} {
		if !repoPartRe.MatchString(p) || p == "." || p == ".." || strings.HasSuffix(p, ".git") || strings.HasSuffix(p, ".lock") {
			return fmt.Errorf("%w: repository %q", ErrInvalid, r.String())
		}
	}
	return nil
}

// ParseRepo parses "owner/name".
func ParseRepo(s string) (Repo, error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok {
		return Repo{}, fmt.Errorf("%w: repository %q is not owner/name", ErrInvalid, s)
	}
	r := Repo{Owner: owner, Name: name}
	return r, r.Validate()
}

// Identity is a commit author and committer.
type Identity struct {
	Name  string
	Email string
}

// Validate reports an identity git cannot record as given: empty, or with
// characters that would break the commit header (angle brackets, control
// characters).
func (i Identity) Validate() error {
	for _, v := range []struct{ what, s string }{{"name", i.Name}, {"email", i.Email}} {
		if strings.TrimSpace(v.s) == "" {
			return fmt.Errorf("%w: commit author %s is empty", ErrInvalid, v.what)
		}
		if strings.ContainsAny(v.s, "<>") || strings.IndexFunc(v.s, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return fmt.Errorf("%w: commit author %s %q has < > or control characters", ErrInvalid, v.what, v.s)
		}
	}
	return nil
}

// author is who signs a commit on repo: AuthorFor's answer, else Author.
func (m *Manager) author(ctx context.Context, repo Repo) (Identity, error) {
	if m.cfg.AuthorFor == nil {
		return m.cfg.Author, nil
	}
	id, err := m.cfg.AuthorFor(ctx, repo)
	if err != nil {
		return Identity{}, fmt.Errorf("worktree: commit author for %s: %w", repo, err)
	}
	if err := id.Validate(); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// TokenFunc returns the credential for repo, typically a GitHub App
// installation token. An empty token means anonymous access.
type TokenFunc func(ctx context.Context, repo Repo) (string, error)

// Config configures a Manager. Zero values take the defaults above.
type Config struct {
	// CacheDir holds the mirrors and session worktrees (required).
	CacheDir string
	// BaseURL is the git host; the remote of owner/name is
	// BaseURL/owner/name.git.
	BaseURL string
	// Token supplies the credential per operation; nil means anonymous.
	Token TokenFunc
	// Author signs the session's commits and artifact commits.
	Author Identity
	// AuthorFor, when set, decides the author of each commit on a
	// repository instead of Author (the bot's GitHub account is learned
	// from GitHub, per installation in App mode). It is called once per
	// commit; cache in it. Its answer is checked like Author.
	AuthorFor func(ctx context.Context, repo Repo) (Identity, error)
	// GitData, when set, lets session branches be published through
	// GitHub's Git Data API (see Publish), so that GitHub signs the
	// commits.
	GitData GitDataAPI
	// Publish says when GitData is used; the default publishes through it
	// with an installation token and pushes over git otherwise.
	Publish PublishMode
	// ArtifactBranch receives the session artifacts.
	ArtifactBranch string
	// PushRetries bounds the artifact push retries after a lost race.
	PushRetries int
	// Backend selects go-git or the git CLI for worktree preparation and
	// commits.
	Backend Backend
	// GitPath is the git executable for the CLI backend; empty means "git"
	// looked up on PATH.
	GitPath string
	// Log receives what cannot be returned to a caller: a failed mirror
	// maintenance (see Manager's doc). Nil discards it.
	Log *slog.Logger
}

// Manager prepares session worktrees and commits artifacts. It is safe for
// concurrent use.
type Manager struct {
	cfg     Config
	gitPath string // empty when the CLI backend is not used
	// repackGit is the git CLI for mirror maintenance, looked up whatever
	// the backend; empty disables maintenance. packLimit is packLimit
	// except in tests.
	repackGit string
	packLimit int

	mu    sync.Mutex
	locks map[string]*sync.Mutex // mirror path → in-process lock
}

// New validates cfg, fills defaults and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.CacheDir == "" {
		return nil, fmt.Errorf("%w: CacheDir is required", ErrInvalid)
	}
	abs, err := filepath.Abs(cfg.CacheDir)
	if err != nil {
		return nil, fmt.Errorf("worktree: cache dir: %w", err)
	}
	cfg.CacheDir = abs
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if !strings.HasPrefix(cfg.BaseURL, "https://") && !strings.HasPrefix(cfg.BaseURL, "http://") {
		return nil, fmt.Errorf("%w: BaseURL %q is not http(s)", ErrInvalid, cfg.BaseURL)
	}
	if strings.Contains(cfg.BaseURL, "@") {
		return nil, fmt.Errorf("%w: BaseURL must not carry credentials", ErrInvalid)
	}
	if cfg.Author.Name == "" {
		cfg.Author.Name = DefaultAuthorName
	}
	if cfg.Author.Email == "" {
		cfg.Author.Email = DefaultAuthorEmail
	}
	if err := cfg.Author.Validate(); err != nil {
		return nil, err
	}
	if cfg.ArtifactBranch == "" {
		cfg.ArtifactBranch = DefaultArtifactBranch
	}
	if !validBranch(cfg.ArtifactBranch) {
		return nil, fmt.Errorf("%w: artifact branch %q", ErrInvalid, cfg.ArtifactBranch)
	}
	switch cfg.Publish {
	case PublishAuto, PublishGit:
	case PublishAPI:
		if cfg.GitData == nil {
			return nil, fmt.Errorf("%w: publishing through the Git Data API needs GitData", ErrInvalid)
		}
	default:
		return nil, fmt.Errorf("%w: publish mode %d", ErrInvalid, cfg.Publish)
	}
	if cfg.PushRetries <= 0 {
		cfg.PushRetries = DefaultPushRetries
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, locks: map[string]*sync.Mutex{}, packLimit: packLimit}
	switch cfg.Backend {
	case BackendGoGit:
	case BackendAuto, BackendCLI:
		name := cfg.GitPath
		if name == "" {
			name = "git"
		}
		p, err := exec.LookPath(name)
		if err != nil && cfg.Backend == BackendCLI {
			return nil, fmt.Errorf("%w: git CLI backend: %v", ErrInvalid, err)
		}
		if err == nil {
			m.gitPath = p
		}
	default:
		return nil, fmt.Errorf("%w: backend %d", ErrInvalid, cfg.Backend)
	}
	m.repackGit = m.gitPath
	if m.repackGit == "" {
		name := cfg.GitPath
		if name == "" {
			name = "git"
		}
		m.repackGit, _ = exec.LookPath(name) // none: mirrors are not maintained
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("worktree: cache dir: %w", err)
	}
	return m, nil
}

// UsesCLI reports whether worktree preparation and commits run the git CLI.
func (m *Manager) UsesCLI() bool { return m.gitPath != "" }

func (m *Manager) remoteURL(r Repo) string {
	return m.cfg.BaseURL + "/" + r.Owner + "/" + r.Name + ".git"
}

func (m *Manager) mirrorDir(r Repo) string {
	return filepath.Join(m.cfg.CacheDir, "mirrors", r.Owner, r.Name+".git")
}

// cred is the credential of one operation.
type cred struct {
	token string
}

func (m *Manager) cred(ctx context.Context, r Repo) (cred, error) {
	if m.cfg.Token == nil {
		return cred{}, nil
	}
	t, err := m.cfg.Token(ctx, r)
	if err != nil {
		// The token source's error is its own; it must not contain the token
		// it failed to produce.
		return cred{}, fmt.Errorf("worktree: token for %s: %w", r, err)
	}
	return cred{token: t}, nil
}

func (c cred) auth() transport.AuthMethod {
	if c.token == "" {
		return nil
	}
	return &githttp.BasicAuth{Username: TokenUser, Password: c.token}
}

// scrub masks every form in which the token could appear.
func (c cred) scrub(s string) string {
	if c.token == "" {
		return s
	}
	forms := []string{
		base64.StdEncoding.EncodeToString([]byte(TokenUser + ":" + c.token)),
		base64.URLEncoding.EncodeToString([]byte(TokenUser + ":" + c.token)),
		c.token,
	}
	for _, f := range forms {
		s = strings.ReplaceAll(s, f, "[REDACTED]")
	}
	return s
}

// opError is an error whose message has been scrubbed of the credential. It
// unwraps to the cause so that errors.Is works; callers must print the
// opError itself, not the unwrapped cause.
type opError struct {
	msg string
	err error
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.err }

// wrap returns err prefixed with op and with the credential masked.
func (c cred) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return &opError{msg: c.scrub("worktree: " + op + ": " + err.Error()), err: err}
}

var refComponentRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)

// validBranch accepts the conservative subset of git branch names this
// package creates or is configured with.
func validBranch(b string) bool {
	if b == "" || len(b) > 200 {
		return false
	}
	for _, c := range strings.Split(b, "/") {
		if !refComponentRe.MatchString(c) || strings.HasSuffix(c, ".lock") || strings.Contains(c, "..") || strings.HasSuffix(c, ".") {
			return false
		}
	}
	return true
}

var sessionIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// validSessionID matches runtime/event.ValidSessionID, and also refuses ids
// that cannot be a git path component.
func validSessionID(id string) bool {
	return sessionIDRe.MatchString(id) && !strings.Contains(id, "..") && !strings.HasSuffix(id, ".lock") && !strings.HasSuffix(id, ".")
}

// shortID is the part of a session id used in branch names: its last eight
// letters or digits, lower-cased (the random tail of a ULID or UUID).
func shortID(id string) string {
	var b []byte
	for i := len(id) - 1; i >= 0 && len(b) < 8; i-- {
		c := id[i]
		switch {
		case c >= 'A' && c <= 'Z':
			b = append(b, c+'a'-'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b = append(b, c)
		}
	}
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// SessionBranch is the branch a session's work goes on:
// agent/<number>-<short session id>.
func SessionBranch(number int, sessionID string) (string, error) {
	if number <= 0 {
		return "", fmt.Errorf("%w: issue or pull request number %d", ErrInvalid, number)
	}
	if !validSessionID(sessionID) {
		return "", fmt.Errorf("%w: session id %q", ErrInvalid, sessionID)
	}
	s := shortID(sessionID)
	if s == "" {
		return "", fmt.Errorf("%w: session id %q has no letters or digits", ErrInvalid, sessionID)
	}
	return fmt.Sprintf("agent/%d-%s", number, s), nil
}
