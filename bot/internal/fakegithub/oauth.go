package fakegithub

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// GitHub App user authorization (the OAuth web flow), as github.com serves
// it outside the REST API:
//
//   - GET /login/oauth/authorize?client_id&redirect_uri&state: the browser's
//     signed-in user (SignInBrowser) authorizes the app; GitHub redirects to
//     redirect_uri?code=…&state=… (the state echoed unchanged). A
//     redirect_uri outside the app's callback URL redirects to the
//     callback with error=redirect_uri_mismatch; an unknown client_id is a
//     404 page.
//   - POST /login/oauth/access_token (form or query parameters client_id,
//     client_secret, code, redirect_uri): a user access token ("ghu_…",
//     eight hours) with a refresh token ("ghr_…"). Errors are 200
//     responses with an "error" field (bad_verification_code,
//     incorrect_client_credentials, redirect_uri_mismatch), as on GitHub.
//     JSON when the request accepts application/json, else form-encoded.
//
// A code lives ten minutes and is good once.

// UserTokenLifetime is how long a GitHub App's user access token lives.
const UserTokenLifetime = 8 * time.Hour

// OAuthClient is a GitHub App's OAuth credentials (its "Client ID" and a
// client secret) and its registered callback URL.
type OAuthClient struct {
	ClientID, ClientSecret string
	CallbackURL            string
	AppID                  int64
	// DeviceFlow is the app's "Enable Device Flow" setting (off by
	// default, as on GitHub): without it the device flow's endpoints
	// answer device_flow_disabled.
	DeviceFlow bool
}

type oauthCode struct {
	client      string
	login       string
	redirectURI string
	expires     time.Time
}

// AddOAuthClient registers the OAuth credentials of a GitHub App.
func (f *Fake) AddOAuthClient(c OAuthClient) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.oauthClients == nil {
		f.oauthClients = map[string]*OAuthClient{}
		f.oauthCodes = map[string]*oauthCode{}
	}
	f.oauthClients[c.ClientID] = &c
}

// SignInBrowser makes login the user signed in to the fake's web pages:
// the one who authorizes an app at /login/oauth/authorize ("" signs out).
func (f *Fake) SignInBrowser(login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if login != "" {
		f.ensureUser(login, "User")
	}
	f.browserUser = login
}

// serveOAuth answers the OAuth web flow's endpoints; it returns false for
// every other request.
func (f *Fake) serveOAuth(w http.ResponseWriter, r *http.Request) bool {
	if f.serveDevice(w, r) {
		return true
	}
	switch r.URL.Path {
	case "/login/oauth/authorize":
		f.oauthAuthorize(w, r)
	case "/login/oauth/access_token":
		f.oauthAccessToken(w, r)
	default:
		return false
	}
	return true
}

func (f *Fake) oauthAuthorize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := Request{Method: r.Method, Path: r.URL.Path, Op: "oauth authorize"}
	c := f.oauthClients[q.Get("client_id")]
	if c == nil {
		rec.Status = http.StatusNotFound
		f.requests = append(f.requests, rec)
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" {
		redirect = c.CallbackURL
	}
	if !callbackMatches(c.CallbackURL, redirect) {
		rec.Status = http.StatusFound
		f.requests = append(f.requests, rec)
		http.Redirect(w, r, withQuery(c.CallbackURL, url.Values{"error": {"redirect_uri_mismatch"}, "error_description": {"The redirect_uri MUST match the registered callback URL for this application."}, "state": {q.Get("state")}}), http.StatusFound)
		return
	}
	if f.browserUser == "" {
		// The sign-in page: nobody is signed in to GitHub in this browser.
		rec.Status = http.StatusOK
		f.requests = append(f.requests, rec)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>Sign in to GitHub</title><h1>Sign in to GitHub</h1>"))
		return
	}
	code := randomHex(10)
	f.oauthCodes[code] = &oauthCode{client: c.ClientID, login: f.browserUser, redirectURI: q.Get("redirect_uri"), expires: f.now().Add(10 * time.Minute)}
	rec.Status, rec.Actor = http.StatusFound, f.browserUser
	f.requests = append(f.requests, rec)
	v := url.Values{"code": {code}}
	if s := q.Get("state"); s != "" {
		v.Set("state", s)
	}
	http.Redirect(w, r, withQuery(redirect, v), http.StatusFound)
}

func (f *Fake) oauthAccessToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	_ = r.ParseForm() // body and query, as GitHub takes both
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := Request{Method: r.Method, Path: r.URL.Path, Op: "oauth access_token", Status: http.StatusOK}
	defer func() { f.requests = append(f.requests, rec) }()
	if r.Form.Get("grant_type") == DeviceGrantType || r.Form.Get("device_code") != "" {
		f.deviceAccessToken(w, r, &rec)
		return
	}
	reply := func(v map[string]any) { oauthReply(w, r, v) }
	fail := func(code, desc string) {
		reply(map[string]any{"error": code, "error_description": desc, "error_uri": "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#" + strings.ReplaceAll(code, "_", "-")})
	}
	c := f.oauthClients[r.Form.Get("client_id")]
	if c == nil || r.Form.Get("client_secret") != c.ClientSecret {
		fail("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
		return
	}
	code := f.oauthCodes[r.Form.Get("code")]
	if code == nil || code.client != c.ClientID || !f.now().Before(code.expires) {
		fail("bad_verification_code", "The code passed is incorrect or expired.")
		return
	}
	delete(f.oauthCodes, r.Form.Get("code")) // good once
	if ru := r.Form.Get("redirect_uri"); ru != "" && ru != code.redirectURI {
		fail("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.")
		return
	}
	tok := "ghu_" + randomHex(18)
	f.tokens[tok] = &identity{user: f.ensureUser(code.login, "User"), expires: f.now().Add(UserTokenLifetime)}
	rec.Actor = code.login
	reply(map[string]any{
		"access_token": tok, "expires_in": int(UserTokenLifetime / time.Second),
		"refresh_token": "ghr_" + randomHex(30), "refresh_token_expires_in": 15897600,
		"scope": "", "token_type": "bearer",
	})
}

// callbackMatches applies GitHub's rule: the redirect_uri's host and port
// must be the callback URL's, and its path must be the callback's path or
// below it.
func callbackMatches(callback, redirect string) bool {
	cb, err1 := url.Parse(callback)
	ru, err2 := url.Parse(redirect)
	if err1 != nil || err2 != nil || callback == "" {
		return false
	}
	if cb.Scheme != ru.Scheme || cb.Host != ru.Host {
		return false
	}
	p := strings.TrimSuffix(cb.Path, "/")
	return ru.Path == cb.Path || strings.HasPrefix(ru.Path, p+"/")
}

// oauthReply answers an OAuth endpoint as github.com does: JSON when the
// request accepts application/json (numbers as numbers), else
// form-encoded.
func oauthReply(w http.ResponseWriter, r *http.Request, v map[string]any) {
	if strings.Contains(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(v)
		return
	}
	form := url.Values{}
	for k, s := range v {
		form.Set(k, fmt.Sprint(s))
	}
	w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	_, _ = w.Write([]byte(form.Encode()))
}

func withQuery(u string, v url.Values) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + v.Encode()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
