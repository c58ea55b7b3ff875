package viewer

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// OAuth is "Sign in with GitHub" through the GitHub App's user
// authorization (the OAuth web flow): /login sends the browser to GitHub,
// GitHub sends it back to /login/callback with a code, the code becomes a
// user access token, GET /user names the login, and the viewer sets its
// own session cookie. The user's token is used for nothing else and not
// kept: permissions are asked with the bot's credentials, as for commands.
type OAuth struct {
	ClientID, ClientSecret string
	// WebURL is GitHub's web root (https://github.com, or
	// https://HOST for GitHub Enterprise Server).
	WebURL string
	// APIURL is the REST API root (https://api.github.com, or
	// https://HOST/api/v3).
	APIURL string
	// CallbackURL is this server's /login/callback as GitHub must send
	// the browser back to it (registered as the app's callback URL).
	CallbackURL string
	// Client defaults to a client with a 15 s timeout.
	Client *http.Client
}

const stateCookie = "agentos_oauth"

// login starts the flow: a random state, bound to this browser by a
// signed, short-lived cookie, with the page to return to.
func (v *Viewer) login(c *gin.Context) {
	next := c.Query("next")
	if !localPath(next) {
		next = "/runs"
	}
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		c.String(http.StatusInternalServerError, "no randomness")
		return
	}
	state := base64.RawURLEncoding.EncodeToString(b)
	ck := &http.Cookie{Name: stateCookie, Value: v.o.Access.Sign("oauth", state+"|"+next), Path: "/login", MaxAge: 600, HttpOnly: true, Secure: v.o.Access.Secure(), SameSite: http.SameSiteLaxMode}
	http.SetCookie(c.Writer, ck)
	q := url.Values{"client_id": {v.o.OAuth.ClientID}, "redirect_uri": {v.o.OAuth.CallbackURL}, "state": {state}}
	c.Redirect(http.StatusFound, strings.TrimRight(v.o.OAuth.WebURL, "/")+"/login/oauth/authorize?"+q.Encode())
}

// localPath admits only paths on this server ("/x", not "//host" or
// "/\host", which browsers treat as another origin).
func localPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.HasPrefix(p, "/\\") && !strings.ContainsAny(p, "\r\n")
}

func (v *Viewer) callback(c *gin.Context) {
	fail := func(status int, msg string) {
		d := v.base(c, v.anonymous(), "Sign-in failed")
		d.Heading, d.Message = "Sign-in failed", msg
		v.render(c, status, errorPage, d)
	}
	http.SetCookie(c.Writer, &http.Cookie{Name: stateCookie, Value: "", Path: "/login", MaxAge: -1, HttpOnly: true, Secure: v.o.Access.Secure(), SameSite: http.SameSiteLaxMode})
	if e := c.Query("error"); e != "" {
		fail(http.StatusUnauthorized, "GitHub did not authorize the sign-in: "+e)
		return
	}
	ck, err := c.Request.Cookie(stateCookie)
	if err != nil {
		fail(http.StatusBadRequest, "the sign-in expired or was started in another browser; sign in again")
		return
	}
	val, ok := v.o.Access.Verify("oauth", ck.Value)
	state, next, _ := strings.Cut(val, "|")
	if !ok || state == "" || c.Query("state") != state {
		fail(http.StatusBadRequest, "the sign-in's state does not match (a forged or replayed callback); sign in again")
		return
	}
	code := c.Query("code")
	if code == "" {
		fail(http.StatusBadRequest, "GitHub sent no code")
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 20*time.Second)
	defer cancel()
	login, err := v.o.OAuth.exchange(ctx, code)
	if err != nil {
		v.o.Logger.Warn("viewer: sign-in failed", "error", err)
		fail(http.StatusUnauthorized, "GitHub refused the sign-in: "+err.Error())
		return
	}
	sess, err := v.o.Access.IssueCookie(login)
	if err != nil {
		fail(http.StatusInternalServerError, "no session cookie")
		return
	}
	http.SetCookie(c.Writer, sess)
	v.o.Logger.Info("viewer: signed in", "login", login)
	if !localPath(next) {
		next = "/runs"
	}
	c.Redirect(http.StatusSeeOther, next)
}

func (v *Viewer) logout(c *gin.Context) {
	p, ok := v.identify(c)
	if !ok {
		return
	}
	if p.Kind == 0 || !v.o.Access.CheckCSRF(p, c.PostForm("csrf")) {
		c.Redirect(http.StatusSeeOther, "/runs")
		return
	}
	http.SetCookie(c.Writer, v.o.Access.ClearCookie())
	c.Redirect(http.StatusSeeOther, "/runs")
}

// DeviceInfo is the body of GET /v1/auth/device: what `agentos login
// --server URL` needs for GitHub's device flow, so that the CLI is given
// only the server's URL. The client ID is the GitHub App's (public: the
// device flow uses no client secret); the app must have "Enable Device
// Flow" on.
type DeviceInfo struct {
	ClientID  string `json:"client_id"`
	GitHubURL string `json:"github_url"` // https://github.com or https://HOST
	APIURL    string `json:"api_url"`    // https://api.github.com or https://HOST/api/v3
}

func (v *Viewer) deviceInfo(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, DeviceInfo{ClientID: v.o.OAuth.ClientID, GitHubURL: strings.TrimRight(v.o.OAuth.WebURL, "/"), APIURL: strings.TrimRight(v.o.OAuth.APIURL, "/")})
}
