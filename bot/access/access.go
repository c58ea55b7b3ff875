// Package access decides who may read a session (its snapshot, its event
// stream, its viewer page) and who may answer its approvals from the
// viewer. It is shared by the HTTP API and the run viewer so that every
// read goes through the same check.
//
// Three kinds of callers:
//
//   - operators: the API bearer token (Authorization: Bearer …) may read
//     every session;
//   - maintainers: a signed, expiring session cookie set after "Sign in
//     with GitHub" names a GitHub login; the collaborator permission API
//     (through auth.Authorizer, so the same rules as for commands: never
//     the bot itself, allow-lists, fail closed) must report read or more
//     on the session's repository to view, write or more to approve;
//   - maintainers outside a browser: the GitHub user access token of
//     `agentos login` (the device flow) as the bearer token; GitHub names
//     its user (GET /user) and the same check applies;
//   - everyone else, who may read nothing.
//
// A session started outside GitHub (the API's POST /v1/runs, `agentos
// run`) names no repository: only operators may read it. A refusal is
// indistinguishable from an unknown session (404), so that the viewer is
// no oracle for private repositories' session ids.
package access

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/runtime/event"
)

// CookieName is the viewer's session cookie.
const CookieName = "agentos_session"

// Kind is the kind of caller.
type Kind int

// Kinds of callers.
const (
	Anonymous Kind = iota
	Operator
	User
)

func (k Kind) String() string {
	switch k {
	case Operator:
		return "operator"
	case User:
		return "user"
	}
	return "anonymous"
}

// Principal is who a request comes from.
type Principal struct {
	Kind    Kind
	Login   string    // User: the GitHub login
	Expires time.Time // User: when the cookie expires
	// Bearer: a User identified by a GitHub user token (agentos login),
	// not a cookie.
	Bearer bool
	// csrf is the CSRF token of the cookie's session (User only).
	csrf string
}

// CSRF is the token a state-changing form must carry ("" for callers
// without a cookie session).
func (p Principal) CSRF() string { return p.csrf }

// Errors of Identify; each is a client error (400), never a refusal that
// could be mistaken for "no such session".
var (
	// ErrTokenInQuery: a credential in the URL ends up in logs, browser
	// history and Referer headers, so it is refused, not just ignored.
	ErrTokenInQuery = errors.New("credentials in the query string are refused: send Authorization: Bearer <token>")
	// ErrBadBearer: an Authorization header that is not the operator token.
	ErrBadBearer = errors.New("the bearer token is not valid")
)

// Options configure a Checker.
type Options struct {
	// Token is the operator's bearer token ("" disables operator access).
	Token string
	// Secret signs session cookies and CSRF tokens; at least 32 bytes.
	// Empty: a random key, so cookies die with the process (and are not
	// shared between replicas).
	Secret []byte
	// Authorizer checks a maintainer's permission on a repository; nil
	// disables maintainer access (only operators read).
	Authorizer Authorizer
	// CookieTTL is how long a sign-in lasts (default 8 hours, the life of
	// a GitHub App's user access token).
	CookieTTL time.Duration
	// Secure marks cookies Secure (set it when served behind TLS).
	Secure bool
	// Users resolves a GitHub user access token sent as the bearer token
	// (agentos login's) to its login; nil: only the operator's token is a
	// valid bearer token.
	Users Users
	// UserTokenTTL is how long a resolved user token is remembered
	// (default one minute: a revoked token reads for at most that long).
	UserTokenTTL time.Duration
	// Open admits every request as an operator: `agentos view` serving one
	// local file read-only on the loopback interface. Never for serve.
	Open bool
	// Now defaults to time.Now.
	Now func() time.Time
}

// Checker applies Options. It is safe for concurrent use.
type Checker struct {
	o      Options
	tokenH [sha256.Size]byte
	secret []byte
	authz  atomic.Pointer[authorizerBox]
	users  userCache
}

// Authorizer is the permission check (*auth.Authorizer).
type Authorizer interface {
	Authorize(ctx context.Context, r auth.Request) auth.Decision
}

type authorizerBox struct{ Authorizer }

// SetAuthorizer sets the maintainers' permission check once it can be
// built (the server learns the bot's own login from GitHub after start);
// until then signed-in maintainers read nothing.
func (c *Checker) SetAuthorizer(a Authorizer) { c.authz.Store(&authorizerBox{a}) }

// New returns a Checker.
func New(o Options) (*Checker, error) {
	if o.CookieTTL <= 0 {
		o.CookieTTL = 8 * time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.UserTokenTTL <= 0 {
		o.UserTokenTTL = time.Minute
	}
	c := &Checker{o: o, secret: o.Secret}
	if o.Authorizer != nil {
		c.SetAuthorizer(o.Authorizer)
	}
	switch {
	case len(c.secret) == 0:
		c.secret = make([]byte, 32)
		if _, err := rand.Read(c.secret); err != nil {
			return nil, fmt.Errorf("access: cookie key: %w", err)
		}
	case len(c.secret) < 32:
		return nil, fmt.Errorf("access: the cookie secret has %d bytes; it needs at least 32", len(c.secret))
	}
	if o.Token != "" {
		c.tokenH = sha256.Sum256([]byte(o.Token))
	}
	return c, nil
}

// Open reports whether the checker admits everyone (agentos view).
func (c *Checker) Open() bool { return c.o.Open }

// SignInEnabled reports whether maintainers can sign in.
func (c *Checker) SignInEnabled() bool { return c.authz.Load() != nil }

// queryCredentialNames are query parameters that carry credentials in
// other APIs; their presence is refused.
var queryCredentialNames = []string{"access_token", "token", "api_token", "bearer", "auth", "authorization", "key"}

// Identify says who r comes from. A request without credentials, or with
// a cookie that is forged, expired or malformed, is Anonymous (the cookie
// is ignored, not an error: the browser may hold a stale one). A bad
// bearer token and credentials in the query string are errors.
func (c *Checker) Identify(r *http.Request) (Principal, error) {
	if c.o.Open {
		return Principal{Kind: Operator}, nil
	}
	q := r.URL.Query()
	for _, n := range queryCredentialNames {
		if q.Has(n) {
			return Principal{}, ErrTokenInQuery
		}
	}
	if c.o.Token != "" && len(c.o.Token) >= 8 && strings.Contains(r.URL.RawQuery+r.URL.Path, c.o.Token) {
		return Principal{}, ErrTokenInQuery
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		tok = strings.TrimSpace(tok)
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return Principal{}, ErrBadBearer
		}
		got := sha256.Sum256([]byte(tok))
		if c.o.Token != "" && subtle.ConstantTimeCompare(got[:], c.tokenH[:]) == 1 {
			return Principal{Kind: Operator}, nil
		}
		// A maintainer's GitHub user token (agentos login): the same
		// permission check as a signed-in browser, without a CSRF token
		// (it cannot post the viewer's forms).
		login, err := c.userLogin(r.Context(), tok)
		if err != nil {
			return Principal{}, err
		}
		return Principal{Kind: User, Login: login, Bearer: true}, nil
	}
	if ck, err := r.Cookie(CookieName); err == nil {
		if p, ok := c.parseCookie(ck.Value); ok {
			return p, nil
		}
	}
	return Principal{}, nil
}

// Level is what a caller wants to do with a session.
type Level int

// Levels.
const (
	Read Level = iota + 1
	Approve
)

// Allowed decides whether p may act at level on a session of repo
// ("owner/name"; "" for a session outside GitHub). It fails closed.
func (c *Checker) Allowed(ctx context.Context, p Principal, repo string, level Level) bool {
	switch p.Kind {
	case Operator:
		return level == Read || !c.o.Open
	case User:
	default:
		return false
	}
	authz := c.authz.Load()
	if authz == nil || repo == "" || p.Login == "" {
		return false
	}
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return false
	}
	d := authz.Authorize(ctx, auth.Request{Owner: owner, Repo: name, Login: p.Login, UserType: "User", Action: auth.ActionApprove})
	if level == Approve {
		return d.Allowed
	}
	if d.Reason == auth.ReasonPermission || d.Allowed {
		switch d.Permission {
		case "read", "triage", "write", "maintain", "admin":
			return true
		}
	}
	return false
}

// RepoOf is the GitHub repository ("owner/name") a session belongs to, as
// its first run.started records it (the bot writes trigger.repo), or ""
// for a session started outside GitHub. The first run decides: a later
// event cannot move a session into another repository.
func RepoOf(evs []event.Event) string {
	for i := range evs {
		if evs[i].Type == event.RunStarted {
			return event.FieldString(event.Field(evs[i].Payload, "trigger"), "repo")
		}
	}
	return ""
}

// cookie is the signed content of a session cookie.
type cookie struct {
	Login   string `json:"l"`
	Expires int64  `json:"e"` // unix seconds
	Nonce   string `json:"n"`
}

// IssueCookie returns the session cookie for login.
func (c *Checker) IssueCookie(login string) (*http.Cookie, error) {
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	exp := c.o.Now().Add(c.o.CookieTTL)
	body, err := json.Marshal(cookie{Login: login, Expires: exp.Unix(), Nonce: base64.RawURLEncoding.EncodeToString(nonce)})
	if err != nil {
		return nil, err
	}
	payload := base64.RawURLEncoding.EncodeToString(body)
	v := payload + "." + base64.RawURLEncoding.EncodeToString(c.mac("session", payload))
	return c.newCookie(CookieName, v, exp), nil
}

// ClearCookie returns a cookie that deletes the session cookie.
func (c *Checker) ClearCookie() *http.Cookie {
	ck := c.newCookie(CookieName, "", time.Unix(0, 0))
	ck.MaxAge = -1
	return ck
}

func (c *Checker) newCookie(name, value string, exp time.Time) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", Expires: exp, HttpOnly: true, Secure: c.o.Secure, SameSite: http.SameSiteLaxMode}
}

func (c *Checker) parseCookie(v string) (Principal, bool) {
	payload, sig, ok := strings.Cut(v, ".")
	if !ok {
		return Principal{}, false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, c.mac("session", payload)) {
		return Principal{}, false
	}
	body, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return Principal{}, false
	}
	var ck cookie
	if json.Unmarshal(body, &ck) != nil || ck.Login == "" || ck.Nonce == "" {
		return Principal{}, false
	}
	exp := time.Unix(ck.Expires, 0)
	if !c.o.Now().Before(exp) {
		return Principal{}, false
	}
	return Principal{Kind: User, Login: ck.Login, Expires: exp, csrf: base64.RawURLEncoding.EncodeToString(c.mac("csrf", ck.Nonce))}, true
}

// CheckCSRF reports whether token is p's CSRF token.
func (c *Checker) CheckCSRF(p Principal, token string) bool {
	return p.csrf != "" && subtle.ConstantTimeCompare([]byte(p.csrf), []byte(token)) == 1
}

// Sign signs a short value (the OAuth state) with purpose; Verify checks it.
func (c *Checker) Sign(purpose, v string) string {
	return v + "." + base64.RawURLEncoding.EncodeToString(c.mac(purpose, v))
}

// Verify returns the value Sign signed for purpose.
func (c *Checker) Verify(purpose, signed string) (string, bool) {
	i := strings.LastIndexByte(signed, '.')
	if i < 0 {
		return "", false
	}
	got, err := base64.RawURLEncoding.DecodeString(signed[i+1:])
	if err != nil || !hmac.Equal(got, c.mac(purpose, signed[:i])) {
		return "", false
	}
	return signed[:i], true
}

// Secure reports whether cookies are marked Secure.
func (c *Checker) Secure() bool { return c.o.Secure }

// Now is the checker's clock.
func (c *Checker) Now() time.Time { return c.o.Now() }

func (c *Checker) mac(purpose, v string) []byte {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("agentos-viewer\x00" + purpose + "\x00"))
	m.Write([]byte(v))
	return m.Sum(nil)
}
