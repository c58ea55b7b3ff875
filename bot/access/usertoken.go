package access

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Maintainers outside a browser (agentos login, then agentos runs and
// agentos view --server) send the GitHub user access token the device
// flow gave them as the bearer token. The server asks GitHub whose it is
// (GET /user with that token, remembered for UserTokenTTL) and then
// applies the same permission check as for a signed-in browser. The
// token is used for nothing else, never stored and never logged.

// Errors of Identify for a user token.
var (
	// ErrUserTokenRejected: GitHub does not accept the token (expired,
	// revoked, or not a user's).
	ErrUserTokenRejected = errors.New("GitHub does not accept this token (expired or revoked): sign in again with agentos login")
	// ErrGitHubUnavailable: GitHub could not say whose the token is
	// (unreachable, 5xx, rate limited); the caller may retry.
	ErrGitHubUnavailable = errors.New("GitHub could not be asked whose the token is; try again")
)

// Users resolves a GitHub user access token to the user's login.
type Users interface {
	// Login returns the login of the token's user, ErrUserTokenRejected
	// when GitHub refuses the token, or an error wrapping
	// ErrGitHubUnavailable.
	Login(ctx context.Context, token string) (string, error)
}

// GitHubUsers asks GitHub's REST API (GET /user).
type GitHubUsers struct {
	// APIURL is the REST API root (https://api.github.com or
	// https://HOST/api/v3).
	APIURL string
	// Client defaults to a client with a 10 s timeout.
	Client *http.Client
}

// Login implements Users.
func (g GitHubUsers) Login(ctx context.Context, token string) (string, error) {
	hc := g.Client
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(g.APIURL, "/")+"/user", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrGitHubUnavailable, redactErr(err, token))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrGitHubUnavailable, err)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 ||
		(resp.StatusCode == http.StatusForbidden && resp.Header.Get("X-RateLimit-Remaining") == "0"):
		return "", fmt.Errorf("%w: GET /user: HTTP %d", ErrGitHubUnavailable, resp.StatusCode)
	default: // 401 bad or expired credentials; 403 an installation's or app's token
		return "", ErrUserTokenRejected
	}
	var u struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	}
	if err := json.Unmarshal(body, &u); err != nil || u.Login == "" {
		return "", fmt.Errorf("%w: GET /user: no login in the answer", ErrGitHubUnavailable)
	}
	if u.Type != "" && u.Type != "User" {
		return "", ErrUserTokenRejected // a bot's or an organization's account reads nothing as a user
	}
	return u.Login, nil
}

// redactErr keeps a transport error from quoting the token (it never
// does today; a future client could).
func redactErr(err error, token string) string {
	return strings.ReplaceAll(err.Error(), token, "[token]")
}

// LooksLikeGitHubToken reports whether tok has the form of a GitHub
// user-to-server, OAuth or personal access token. Only those are sent to
// GitHub, so that an arbitrary bearer string costs no GitHub request.
func LooksLikeGitHubToken(tok string) bool {
	if len(tok) < 20 || len(tok) > 512 {
		return false
	}
	for _, p := range []string{"ghu_", "gho_", "ghp_", "github_pat_"} {
		if strings.HasPrefix(tok, p) {
			for _, r := range tok {
				if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
					return false
				}
			}
			return true
		}
	}
	return false
}

// userCache remembers resolved tokens (by their SHA-256, never the token)
// for a short while: a CLI listing sessions makes one GitHub request, not
// one per call. Refusals are not remembered.
type userCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]userEntry
}

type userEntry struct {
	login string
	until time.Time
}

const userCacheMax = 4096

func (c *userCache) get(k [sha256.Size]byte, now time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !now.Before(e.until) {
		return "", false
	}
	return e.login, true
}

func (c *userCache) put(k [sha256.Size]byte, login string, until time.Time, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[sha256.Size]byte]userEntry{}
	}
	if len(c.m) >= userCacheMax {
		for k, e := range c.m {
			if !now.Before(e.until) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= userCacheMax {
			c.m = map[[sha256.Size]byte]userEntry{}
		}
	}
	c.m[k] = userEntry{login: login, until: until}
}

// userLogin resolves a bearer token that is not the operator's.
func (c *Checker) userLogin(ctx context.Context, tok string) (string, error) {
	if c.o.Users == nil || !LooksLikeGitHubToken(tok) {
		return "", ErrBadBearer
	}
	k := sha256.Sum256([]byte(tok))
	now := c.o.Now()
	if login, ok := c.users.get(k, now); ok {
		return login, nil
	}
	login, err := c.o.Users.Login(ctx, tok)
	if err != nil {
		if errors.Is(err, ErrUserTokenRejected) || errors.Is(err, ErrGitHubUnavailable) {
			return "", err
		}
		return "", fmt.Errorf("%w: %v", ErrGitHubUnavailable, redactErr(err, tok))
	}
	c.users.put(k, login, now.Add(c.o.UserTokenTTL), now)
	return login, nil
}
