// Package github is the bot's GitHub API client: go-github underneath,
// authenticated as a GitHub App (ghinstallation: an app JWT transport plus
// cached per-installation token transports) or with a plain token, against
// api.github.com or a GitHub Enterprise Server URL.
//
// It owns the behaviour every call needs: waiting out primary and secondary
// rate limits, retrying transient failures of idempotent requests, and
// errors callers can branch on (ErrNotFound, ErrForbidden, ErrValidation,
// ErrRateLimited, wrapped as "op: %w"). The type is concrete; consumers
// declare the tiny interface they need.
package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v62/github"
)

// DefaultBaseURL is GitHub.com's REST API.
const DefaultBaseURL = "https://api.github.com/"

// Config says how to reach and authenticate to GitHub. Set either AppID
// and PrivateKey (GitHub App) or Token.
type Config struct {
	// BaseURL is the REST API root: "" for api.github.com, or a GitHub
	// Enterprise Server host ("https://ghe.example.com", to which
	// "/api/v3/" is added).
	BaseURL string

	AppID      int64
	PrivateKey []byte // PEM (PKCS#1 or PKCS#8 RSA key)

	Token string

	// Transport is the underlying HTTP transport (nil: http.DefaultTransport).
	Transport http.RoundTripper
	Retry     RetryPolicy
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	app := c.AppID != 0 || len(c.PrivateKey) > 0
	switch {
	case app && c.Token != "":
		return errors.New("github: config: set either a GitHub App (app id + private key) or a token, not both")
	case app && (c.AppID <= 0 || len(c.PrivateKey) == 0):
		return errors.New("github: config: a GitHub App needs both an app id and a private key")
	case !app && c.Token == "":
		return errors.New("github: config: no credentials (GitHub App or token)")
	}
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("github: config: base URL %q is not an http(s) URL", c.BaseURL)
		}
	}
	return nil
}

// Client calls GitHub. In App mode the root client speaks for the app
// (BotLogin, InstallationID); ForInstallation returns a client that acts on
// repositories. In token mode the root client does both.
type Client struct {
	gh      *gh.Client
	graphQL string // GraphQL endpoint URL
	root    *root
	inst    *ghinstallation.Transport // installation clients only: mints git tokens
}

// root is what all clients derived from one Config share.
type root struct {
	cfg      Config
	base     *url.URL
	apps     *ghinstallation.AppsTransport // nil in token mode
	appGH    *gh.Client                    // JWT-authenticated, App mode only
	retryRT  http.RoundTripper
	mu       sync.Mutex
	installs map[int64]*Client
	login    string // cached bot login
}

// New builds a client from cfg.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	next := cfg.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	r := &root{cfg: cfg, retryRT: &retryTransport{next: next, p: cfg.Retry.withDefaults()}, installs: map[int64]*Client{}}
	if cfg.AppID != 0 {
		atr, err := ghinstallation.NewAppsTransport(r.retryRT, cfg.AppID, cfg.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("github: app private key: %w", err)
		}
		r.apps = atr
		c, err := r.newGH(atr)
		if err != nil {
			return nil, err
		}
		atr.BaseURL = strings.TrimSuffix(c.BaseURL.String(), "/")
		r.base = c.BaseURL
		r.appGH = c
		return &Client{gh: c, graphQL: graphQLURL(c.BaseURL), root: r}, nil
	}
	c, err := r.newGH(r.retryRT)
	if err != nil {
		return nil, err
	}
	c = c.WithAuthToken(cfg.Token)
	r.base = c.BaseURL
	return &Client{gh: c, graphQL: graphQLURL(c.BaseURL), root: r}, nil
}

func (r *root) newGH(rt http.RoundTripper) (*gh.Client, error) {
	c := gh.NewClient(&http.Client{Transport: rt})
	if r.cfg.BaseURL == "" || strings.TrimSuffix(r.cfg.BaseURL, "/")+"/" == DefaultBaseURL {
		return c, nil
	}
	c, err := c.WithEnterpriseURLs(r.cfg.BaseURL, r.cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("github: base URL: %w", err)
	}
	return c, nil
}

// graphQLURL derives the GraphQL endpoint: api.github.com/graphql, or
// HOST/api/graphql on Enterprise Server.
func graphQLURL(base *url.URL) string {
	u := *base
	if strings.HasSuffix(u.Path, "/api/v3/") {
		u.Path = strings.TrimSuffix(u.Path, "v3/") + "graphql"
	} else {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/graphql"
	}
	return u.String()
}

// IsApp reports whether the client authenticates as a GitHub App.
func (c *Client) IsApp() bool { return c.root.apps != nil }

// ForInstallation returns a client acting as installation id of the app,
// cached per id (its token is refreshed before it expires). In token mode
// it returns c.
func (c *Client) ForInstallation(id int64) (*Client, error) {
	r := c.root
	if r.apps == nil {
		return c, nil
	}
	if id <= 0 {
		return nil, invalid("ForInstallation", fmt.Sprintf("installation id %d is not positive", id))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ic, ok := r.installs[id]; ok {
		return ic, nil
	}
	itr := ghinstallation.NewFromAppsTransport(r.apps, id)
	itr.BaseURL = r.apps.BaseURL
	g, err := r.newGH(itr)
	if err != nil {
		return nil, err
	}
	ic := &Client{gh: g, graphQL: graphQLURL(g.BaseURL), root: r, inst: itr}
	r.installs[id] = ic
	return ic, nil
}

// InstallationID finds the app's installation on owner/repo (App mode).
func (c *Client) InstallationID(ctx context.Context, owner, repo string) (int64, error) {
	if c.root.appGH == nil {
		return 0, invalid("InstallationID", "not a GitHub App client")
	}
	inst, _, err := c.root.appGH.Apps.FindRepositoryInstallation(ctx, owner, repo)
	if err != nil {
		return 0, wrap("InstallationID", err)
	}
	return inst.GetID(), nil
}

// BotLogin returns the login the bot acts as: "<app-slug>[bot]" from
// GET /app in App mode (an installation token cannot call GET /user), or
// the token's user from GET /user. The answer is cached.
func (c *Client) BotLogin(ctx context.Context) (string, error) {
	r := c.root
	r.mu.Lock()
	login := r.login
	r.mu.Unlock()
	if login != "" {
		return login, nil
	}
	if r.appGH != nil {
		app, _, err := r.appGH.Apps.Get(ctx, "")
		if err != nil {
			return "", wrap("BotLogin", err)
		}
		if app.GetSlug() == "" {
			return "", &APIError{Op: "BotLogin", Message: "GET /app returned no slug", Err: errors.New("GET /app returned no slug")}
		}
		login = app.GetSlug() + "[bot]"
	} else {
		u, _, err := c.gh.Users.Get(ctx, "")
		if err != nil {
			return "", wrap("BotLogin", err)
		}
		login = u.GetLogin()
	}
	r.mu.Lock()
	r.login = login
	r.mu.Unlock()
	return login, nil
}

// GitHub returns the underlying go-github client for calls this package
// does not wrap.
func (c *Client) GitHub() *gh.Client { return c.gh }

// GitToken is the token for git over HTTPS (user x-access-token): the plain
// token, or this installation's current access token (refreshed by
// ghinstallation before it expires). The app-level client has none.
func (c *Client) GitToken(ctx context.Context) (string, error) {
	if c.root.apps == nil {
		return c.root.cfg.Token, nil
	}
	if c.inst == nil {
		return "", invalid("GitToken", "the app client has no git token: use ForInstallation")
	}
	tok, err := c.inst.Token(ctx)
	if err != nil {
		return "", wrap("GitToken", err)
	}
	return tok, nil
}
