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
	"time"

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

	// Shared, when set, is a cache that replicas sharing a store read and
	// write together (runtime/store/postgres.Cache): in App mode the
	// app's login (GET /app) is asked once for all of them, not once per
	// process. Installation tokens are never put there (a secret in the
	// database); each process mints its own.
	Shared SharedCache
}

// SharedCache is a key/value cache with expiry shared by replicas.
type SharedCache interface {
	Get(ctx context.Context, key string) (string, bool, error)
	Put(ctx context.Context, key, value string, ttl time.Duration) error
}

// appLoginTTL is how long the app's login is taken from the shared cache:
// an app renamed on GitHub is seen within the hour.
const appLoginTTL = time.Hour

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
// with its JWT (BotLogin, InstallationID) and hands every
// repository-scoped call to the repository's installation: the
// installation is the one RememberInstallation recorded (webhook payloads
// carry it), or else looked up once (GET /repos/{owner}/{repo}/installation)
// and cached; each installation has one client whose token is minted once
// and reused until shortly before it expires. In token mode one client
// does everything.
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
	login    string   // cached bot login
	self     *gh.User // GET /user's answer (token mode), for the commit identity
	// byRepo maps lower(owner/repo) to its installation id; lookups holds
	// the look-ups in flight, so concurrent callers share one request.
	byRepo  map[string]int64
	lookups map[string]*lookup
	// people caches GET /users/{login} answers (commit identities).
	people map[string]*gh.User
}

// lookup is one installation look-up in flight.
type lookup struct {
	done chan struct{}
	id   int64
	err  error
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
	r := &root{cfg: cfg, retryRT: &retryTransport{next: next, p: cfg.Retry.withDefaults()}, installs: map[int64]*Client{},
		byRepo: map[string]int64{}, lookups: map[string]*lookup{}, people: map[string]*gh.User{}}
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

// newGH builds a go-github client on rt for the configured API URL:
// api.github.com, or a GitHub Enterprise Server given as https://HOST or
// https://HOST/api/v3[/] (go-github adds /api/v3/ only when it is missing;
// uploads go to HOST/api/uploads/).
func (r *root) newGH(rt http.RoundTripper) (*gh.Client, error) {
	c := gh.NewClient(&http.Client{Transport: rt})
	if r.cfg.BaseURL == "" || strings.TrimSuffix(r.cfg.BaseURL, "/")+"/" == DefaultBaseURL {
		return c, nil
	}
	c, err := c.WithEnterpriseURLs(r.cfg.BaseURL, uploadURL(r.cfg.BaseURL))
	if err != nil {
		return nil, fmt.Errorf("github: base URL: %w", err)
	}
	return c, nil
}

// uploadURL is Enterprise Server's upload root for an API URL.
func uploadURL(api string) string {
	u, err := url.Parse(api)
	if err != nil {
		return api
	}
	p := strings.TrimSuffix(u.Path, "/")
	if strings.HasSuffix(p, "/api/v3") {
		u.Path = strings.TrimSuffix(p, "/api/v3") + "/api/uploads/"
	}
	return u.String()
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
// cached per id: one ghinstallation transport per installation, whose
// token is minted on first use and refreshed a minute before it expires.
// In token mode it returns c.
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

func repoKey(owner, repo string) string { return strings.ToLower(owner + "/" + repo) }

// RememberInstallation records that the app's installation id serves
// owner/repo (every webhook of an installed app carries it), so that no
// look-up is needed. A later id for the same repository replaces it (the
// app was reinstalled). It does nothing in token mode or for id <= 0.
func (c *Client) RememberInstallation(owner, repo string, id int64) {
	r := c.root
	if r.apps == nil || id <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byRepo[repoKey(owner, repo)] = id
}

// ForgetInstallation drops what is known of installation id (it was
// deleted, or lost repositories): the next call on those repositories
// looks their installation up again.
func (c *Client) ForgetInstallation(id int64) {
	r := c.root
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.byRepo {
		if v == id {
			delete(r.byRepo, k)
		}
	}
}

// ForRepo returns the client that acts on owner/repo: c itself in token
// mode or on an installation client; in App mode the repository's
// installation client (see Client).
func (c *Client) ForRepo(ctx context.Context, owner, repo string) (*Client, error) {
	if c.root.apps == nil || c.inst != nil {
		return c, nil
	}
	id, err := c.installationOf(ctx, owner, repo)
	if err != nil {
		return nil, err
	}
	return c.ForInstallation(id)
}

// installationOf returns owner/repo's installation: remembered, cached,
// or looked up once (concurrent callers wait for the same look-up).
func (c *Client) installationOf(ctx context.Context, owner, repo string) (int64, error) {
	r := c.root
	k := repoKey(owner, repo)
	r.mu.Lock()
	if id, ok := r.byRepo[k]; ok {
		r.mu.Unlock()
		return id, nil
	}
	if l, ok := r.lookups[k]; ok {
		r.mu.Unlock()
		select {
		case <-l.done:
			return l.id, l.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	l := &lookup{done: make(chan struct{})}
	r.lookups[k] = l
	r.mu.Unlock()
	l.id, l.err = c.InstallationID(ctx, owner, repo)
	r.mu.Lock()
	delete(r.lookups, k)
	if l.err == nil {
		if _, ok := r.byRepo[k]; !ok { // a remembered id wins over the look-up
			r.byRepo[k] = l.id
		}
		l.id = r.byRepo[k]
	}
	r.mu.Unlock()
	close(l.done)
	return l.id, l.err
}

// InstallationID finds the app's installation on owner/repo (App mode),
// asking GitHub (GET /repos/{owner}/{repo}/installation, with the app's
// JWT). ForRepo caches its answer; call this only to ask again.
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
	var self *gh.User
	if r.appGH != nil {
		key := fmt.Sprintf("github.app-login:%s:%d", r.base.Host, r.cfg.AppID)
		if r.cfg.Shared != nil {
			if v, ok, err := r.cfg.Shared.Get(ctx, key); err == nil && ok && strings.HasSuffix(v, "[bot]") {
				r.mu.Lock()
				r.login = v
				r.mu.Unlock()
				return v, nil
			}
		}
		app, _, err := r.appGH.Apps.Get(ctx, "")
		if err != nil {
			return "", wrap("BotLogin", err)
		}
		if app.GetSlug() == "" {
			return "", &APIError{Op: "BotLogin", Message: "GET /app returned no slug", Err: errors.New("GET /app returned no slug")}
		}
		login = app.GetSlug() + "[bot]"
		if r.cfg.Shared != nil {
			// Not stored: the next process asks GitHub, as it would
			// without the cache.
			_ = r.cfg.Shared.Put(ctx, key, login, appLoginTTL)
		}
	} else {
		u, _, err := c.gh.Users.Get(ctx, "")
		if err != nil {
			return "", wrap("BotLogin", err)
		}
		login, self = u.GetLogin(), u
	}
	r.mu.Lock()
	r.login, r.self = login, self
	r.mu.Unlock()
	return login, nil
}

// Identity is a commit author.
type Identity struct {
	Name, Email string
}

// String is "Name <email>".
func (i Identity) String() string { return i.Name + " <" + i.Email + ">" }

// NoReplyEmail is GitHub's private address of an account,
// <id>+<login>@users.noreply.github.com on github.com (the host's domain
// on Enterprise Server is the operator's to configure): GitHub attributes
// commits with it to the account.
func NoReplyEmail(id int64, login string) string {
	return fmt.Sprintf("%d+%s@users.noreply.github.com", id, login)
}

// CommitIdentity returns the identity of account login (the bot's login)
// for commits on owner/repo: its display name (or login) and its noreply
// address. In token mode, the answer of GET /user that BotLogin already
// made serves when it is that account; otherwise (a configured login
// such as github-actions[bot], or an app's <slug>[bot]) it asks GET
// /users/{login}, through the repository's installation in App mode (an
// app's JWT cannot read users). Answers are cached for the process.
func (c *Client) CommitIdentity(ctx context.Context, owner, repo, login string) (Identity, error) {
	const op = "CommitIdentity"
	if login == "" {
		return Identity{}, invalid(op, "empty login")
	}
	r := c.root
	k := strings.ToLower(login)
	r.mu.Lock()
	u := r.people[k]
	if u == nil && r.self != nil && strings.EqualFold(r.self.GetLogin(), login) {
		u = r.self
	}
	r.mu.Unlock()
	if u == nil {
		rc, err := c.ForRepo(ctx, owner, repo)
		if err != nil {
			return Identity{}, err
		}
		got, _, err := rc.gh.Users.Get(ctx, login)
		if err != nil {
			return Identity{}, wrap(op, err)
		}
		if got.GetID() <= 0 || !strings.EqualFold(got.GetLogin(), login) {
			return Identity{}, &APIError{Op: op, Message: "GET /users/" + login + " answered for another account", Err: errors.New("unexpected account")}
		}
		u = got
		r.mu.Lock()
		r.people[k] = u
		r.mu.Unlock()
	}
	name := u.GetName()
	if name == "" || u.GetType() == "Bot" {
		name = u.GetLogin()
	}
	return Identity{Name: name, Email: NoReplyEmail(u.GetID(), u.GetLogin())}, nil
}

// GitHub returns the underlying go-github client for calls this package
// does not wrap. On an App's root client it speaks with the app's JWT.
func (c *Client) GitHub() *gh.Client { return c.gh }

// GitToken is the token for git over HTTPS (user x-access-token): the plain
// token, or this installation's current access token (refreshed by
// ghinstallation before it expires). The app-level client has none: use
// GitTokenFor.
func (c *Client) GitToken(ctx context.Context) (string, error) {
	if c.root.apps == nil {
		return c.root.cfg.Token, nil
	}
	if c.inst == nil {
		return "", invalid("GitToken", "the app client has no git token: use GitTokenFor or ForInstallation")
	}
	tok, err := c.inst.Token(ctx)
	if err != nil {
		return "", wrap("GitToken", err)
	}
	return tok, nil
}

// GitTokenFor is the git token for owner/repo: the plain token, or the
// token of the repository's installation (see ForRepo).
func (c *Client) GitTokenFor(ctx context.Context, owner, repo string) (string, error) {
	rc, err := c.ForRepo(ctx, owner, repo)
	if err != nil {
		return "", err
	}
	return rc.GitToken(ctx)
}

// on returns the go-github client for a call on repo.
func (c *Client) on(ctx context.Context, repo Repo) (*gh.Client, error) {
	rc, err := c.ForRepo(ctx, repo.Owner, repo.Name)
	if err != nil {
		return nil, err
	}
	return rc.gh, nil
}
