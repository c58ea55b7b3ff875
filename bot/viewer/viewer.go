// Package viewer serves the run viewer: /runs (the sessions a caller may
// read) and /runs/:id (one session: live timeline, pending approvals with
// their diff, cost, terminal report, every event), rendered on the server
// in plain Go with escaping built in (render.go) and progressively enhanced by a small embedded script
// that follows the session's event stream (/v1/runs/:id/events).
//
// Every page is behind the same access check as the API (bot/access):
// operators with the bearer token, maintainers signed in with GitHub who
// have read permission on the session's repository. Refusals look like
// unknown sessions (404). Answering an approval from the page needs write
// permission and a CSRF token, and goes through the Answerer (the bot's
// approval path, recorded "via viewer").
//
// Pages carry a strict Content-Security-Policy: scripts, styles and
// fetches from this origin only, no inline script or style.
package viewer

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/bot/server"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/gin-gonic/gin"
)

//go:embed assets
var assetFS embed.FS

// CSP is the pages' Content-Security-Policy.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// Answer is an answer to a pending approval given on the page.
type Answer struct {
	SessionID, ApprovalID string
	Decision              string // approve | deny
	By                    string // the GitHub login
	Reason                string // "via viewer", plus the user's reason for a denial
}

// Answerer records an answer through the bot's approval path and resumes
// the run. It is called in a background goroutine; the page follows the
// outcome through the event stream.
type Answerer interface {
	Answer(ctx context.Context, a Answer) error
}

// Options configure the viewer.
type Options struct {
	Store  store.Store
	Access *access.Checker
	// Lister lists sessions for /runs (the API's listing, so the page and
	// GET /v1/runs agree).
	Lister Lister
	// OAuth enables "Sign in with GitHub"; nil disables it.
	OAuth *OAuth
	// Answerer answers approvals; nil makes the pages read-only.
	Answerer Answerer
	// ReadOnly marks a replay (agentos view): no sign-in, no answers, no
	// live stream.
	ReadOnly bool
	Logger   *slog.Logger
	Now      func() time.Time
}

// Lister lists sessions a principal may read.
type Lister interface {
	List(c *gin.Context, p access.Principal, f api.ListFilter) (api.RunList, error)
}

// Viewer serves the pages.
type Viewer struct {
	o    Options
	wg   sync.WaitGroup
	ctx  context.Context
	stop context.CancelFunc
}

// New returns a Viewer.
func New(o Options) (*Viewer, error) {
	if o.Store == nil || o.Access == nil {
		return nil, errors.New("viewer: a store and an access checker are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &Viewer{o: o}
	v.ctx, v.stop = context.WithCancel(context.Background())
	return v, nil
}

// Register mounts the pages, the assets and (when enabled) sign-in.
func (v *Viewer) Register(r gin.IRouter) {
	// On a loopback address the pages answer only to their own name
	// (DNS rebinding); the public URL's host is theirs too, for a reverse
	// proxy on the same machine that forwards it.
	r = r.Group("", server.HostGuard(v.publicHosts()...))
	sub, _ := fs.Sub(assetFS, "assets")
	assets := http.StripPrefix("/assets/", http.FileServer(http.FS(sub)))
	r.GET("/assets/*file", func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=3600")
		c.Header("X-Content-Type-Options", "nosniff")
		assets.ServeHTTP(c.Writer, c.Request)
	})
	r.GET("/runs", v.secure, v.list)
	r.GET("/runs/:id", v.secure, v.run)
	r.GET("/runs/:id/parts", v.secure, v.parts)
	r.POST("/runs/:id/approvals/:aid", v.secure, v.answer)
	if v.o.OAuth != nil && !v.o.ReadOnly {
		r.GET("/login", v.secure, v.login)
		r.GET("/login/callback", v.secure, v.callback)
		r.POST("/logout", v.secure, v.logout)
		r.GET("/v1/auth/device", v.deviceInfo)
	}
}

// publicHosts is the host of the public URL sign-in calls back to, if any.
func (v *Viewer) publicHosts() []string {
	if v.o.OAuth == nil {
		return nil
	}
	u, err := url.Parse(v.o.OAuth.CallbackURL)
	if err != nil || u.Host == "" {
		return nil
	}
	return []string{u.Host}
}

// Run is the viewer's actor: when ctx ends it waits for the answers in
// flight.
func (v *Viewer) Run(ctx context.Context) error {
	<-ctx.Done()
	v.stop()
	v.wg.Wait()
	return nil
}

func (v *Viewer) secure(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	c.Next()
}

// page is what every page and part is rendered from.
type page struct {
	Title    string
	Login    string
	Operator bool
	CSRF     string
	SignIn   bool
	ReadOnly bool
	Path     string
	Heading  string
	Message  string
	// list
	Filter api.ListFilter
	States []string
	Runs   []api.RunSummary
	Next   string
	// run
	S          Session
	Live       bool
	MaxRows    int // rows the live script keeps
	CanApprove bool
}

func (v *Viewer) base(c *gin.Context, p access.Principal, title string) page {
	return page{Title: title, Login: p.Login, Operator: p.Kind == access.Operator && !v.o.ReadOnly, CSRF: p.CSRF(), SignIn: v.o.OAuth != nil && !v.o.ReadOnly, ReadOnly: v.o.ReadOnly, Path: c.Request.URL.Path}
}

// render answers with a page: errorPage, listPage or runPage.
func (v *Viewer) render(c *gin.Context, status int, write func(page) []byte, d page) {
	c.Data(status, "text/html; charset=utf-8", write(d))
}

// identify resolves the caller; it answers bad credentials itself.
func (v *Viewer) identify(c *gin.Context) (access.Principal, bool) {
	p, err := v.o.Access.Identify(c.Request)
	if err != nil {
		d := v.base(c, access.Principal{}, "Refused")
		d.Heading, d.Message = "Refused", err.Error()
		status := http.StatusUnauthorized
		switch {
		case errors.Is(err, access.ErrTokenInQuery):
			status = http.StatusBadRequest
		case errors.Is(err, access.ErrGitHubUnavailable):
			status = http.StatusServiceUnavailable
			d.Message = access.ErrGitHubUnavailable.Error() // not GitHub's detail
		}
		v.render(c, status, errorPage, d)
		return p, false
	}
	return p, true
}

func (v *Viewer) notFound(c *gin.Context, p access.Principal) {
	d := v.base(c, p, "Not found")
	d.Heading = "Not found"
	d.Message = "There is no session here, or you may not see it."
	v.render(c, http.StatusNotFound, errorPage, d)
}

var listStates = []string{"running", "paused", "completed", "failed", "denied", "cancelled"}

func (v *Viewer) list(c *gin.Context) {
	p, ok := v.identify(c)
	if !ok {
		return
	}
	d := v.base(c, p, "Sessions")
	d.States = listStates
	f, err := api.ParseListFilter(c)
	if err != nil {
		d.Heading, d.Message = "Bad filter", err.Error()
		v.render(c, http.StatusBadRequest, errorPage, d)
		return
	}
	d.Filter = f
	if p.Kind == access.Anonymous {
		if v.o.OAuth != nil {
			d.Heading, d.Message = "Sign in", "Sign in with GitHub to see the sessions of repositories you can read."
			v.render(c, http.StatusOK, errorPage, d)
			return
		}
		v.notFound(c, p)
		return
	}
	out, err := v.o.Lister.List(c, p, f)
	if err != nil {
		v.o.Logger.Error("viewer: list sessions", "error", err)
		d.Heading, d.Message = "Error", "the sessions could not be listed; see the server log"
		v.render(c, http.StatusInternalServerError, errorPage, d)
		return
	}
	d.Runs = out.Runs
	if out.NextCursor != "" {
		q := url.Values{"cursor": {out.NextCursor}}
		if f.Repository != "" {
			q.Set("repository", f.Repository)
		}
		if f.State != "" {
			q.Set("state", f.State)
		}
		d.Next = q.Encode()
	}
	v.render(c, http.StatusOK, listPage, d)
}

// load reads a session p may read, or answers 404.
func (v *Viewer) load(c *gin.Context, p access.Principal, sid string) ([]event.Event, bool) {
	if !api.ValidSessionID(sid) {
		v.notFound(c, p)
		return nil, false
	}
	evs, err := v.o.Store.Read(c.Request.Context(), sid, 1)
	if err != nil {
		v.o.Logger.Error("viewer: read session", "session", sid, "error", err)
		d := v.base(c, p, "Error")
		d.Heading, d.Message = "Error", "the session could not be read; see the server log"
		v.render(c, http.StatusInternalServerError, errorPage, d)
		return nil, false
	}
	if len(evs) == 0 || !v.o.Access.Allowed(c.Request.Context(), p, access.RepoOf(evs), access.Read) {
		v.notFound(c, p)
		return nil, false
	}
	return evs, true
}

func (v *Viewer) model(c *gin.Context, p access.Principal, sid string) (page, bool) {
	evs, ok := v.load(c, p, sid)
	if !ok {
		return page{}, false
	}
	rows := DefaultMaxRows
	if c.Query("all") == "1" {
		rows = 0
	}
	s, err := BuildRows(sid, evs, v.o.Now(), rows)
	if err != nil {
		v.o.Logger.Error("viewer: replay session", "session", sid, "error", err)
		d := v.base(c, p, "Error")
		d.Heading, d.Message = "Error", "the session's log could not be replayed: "+err.Error()
		v.render(c, http.StatusInternalServerError, errorPage, d)
		return page{}, false
	}
	d := v.base(c, p, "Session "+sid)
	d.S = s
	d.MaxRows = max(rows, len(s.Events))
	d.Live = !v.o.ReadOnly
	d.CanApprove = !v.o.ReadOnly && v.o.Answerer != nil && p.Kind == access.User && len(s.Pending) > 0 &&
		v.o.Access.Allowed(c.Request.Context(), p, s.Repo, access.Approve)
	return d, true
}

func (v *Viewer) run(c *gin.Context) {
	p, ok := v.identify(c)
	if !ok {
		return
	}
	d, ok := v.model(c, p, c.Param("id"))
	if !ok {
		return
	}
	v.render(c, http.StatusOK, runPage, d)
}

// parts re-renders the page's server-side parts for the live script.
func (v *Viewer) parts(c *gin.Context) {
	p, ok := v.identify(c)
	if !ok {
		return
	}
	d, ok := v.model(c, p, c.Param("id"))
	if !ok {
		return
	}
	out := map[string]any{"last_seq": d.S.LastSeq, "state": d.S.State}
	for _, p := range parts {
		var w htmlWriter
		p.render(&w, d)
		out[p.name] = string(w.b)
	}
	c.JSON(http.StatusOK, out)
}

// answer takes Approve / Deny from the page: a signed-in user with write
// permission, the form's CSRF token, and the digest the page showed (an
// approval that changed since is stale and refused).
func (v *Viewer) answer(c *gin.Context) {
	p, ok := v.identify(c)
	if !ok {
		return
	}
	sid, aid := c.Param("id"), c.Param("aid")
	if v.o.ReadOnly || v.o.Answerer == nil || p.Kind != access.User {
		v.notFound(c, p)
		return
	}
	if !v.o.Access.CheckCSRF(p, c.PostForm("csrf")) {
		d := v.base(c, p, "Refused")
		d.Heading, d.Message = "Refused", "the form's CSRF token is missing or wrong; reload the page and answer again"
		v.render(c, http.StatusForbidden, errorPage, d)
		return
	}
	evs, ok := v.load(c, p, sid)
	if !ok {
		return
	}
	repo := access.RepoOf(evs)
	if !v.o.Access.Allowed(c.Request.Context(), p, repo, access.Approve) {
		d := v.base(c, p, "Refused")
		d.Heading, d.Message = "Refused", "answering an approval needs write access to "+repo
		v.render(c, http.StatusForbidden, errorPage, d)
		return
	}
	decision := c.PostForm("decision")
	if decision != "approve" && decision != "deny" {
		d := v.base(c, p, "Bad request")
		d.Heading, d.Message = "Bad request", "decision must be approve or deny"
		v.render(c, http.StatusBadRequest, errorPage, d)
		return
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		v.notFound(c, p)
		return
	}
	var found *replay.Approval
	for i := range snap.PendingApprovals {
		if snap.PendingApprovals[i].ID == aid {
			found = &snap.PendingApprovals[i]
		}
	}
	if found == nil || found.Digest != c.PostForm("digest") || pendingOf(*found).Head != c.PostForm("head") {
		d := v.base(c, p, "Stale")
		d.Heading = "This approval is no longer waiting"
		d.Message = "It was answered, or what it would do changed, since the page was loaded. Reload the page to see what waits now."
		v.render(c, http.StatusConflict, errorPage, d)
		return
	}
	reason := "via viewer"
	if r := strings.TrimSpace(c.PostForm("reason")); r != "" && decision == "deny" {
		reason += ": " + clip(oneLine(r), 500)
	}
	a := Answer{SessionID: sid, ApprovalID: aid, Decision: decision, By: p.Login, Reason: reason}
	v.wg.Add(1)
	go func() {
		defer v.wg.Done()
		if err := v.o.Answerer.Answer(v.ctx, a); err != nil {
			v.o.Logger.Error("viewer: answer", "session", sid, "approval", aid, "by", p.Login, "error", err)
			return
		}
		v.o.Logger.Info("answered from the viewer", "session", sid, "approval", aid, "decision", decision, "by", p.Login)
	}()
	c.Redirect(http.StatusSeeOther, "/runs/"+sid)
}

// replayStatus says what a read-only page (agentos view) shows: the log
// as it was written, whose run may have ended or may be waiting.
func replayStatus(state string) string {
	switch state {
	case "completed", "failed", "denied", "cancelled":
		return "replay of a finished session (" + state + ")"
	case "paused":
		return "replay of a paused session: the run is waiting for an answer to an approval"
	case "running":
		return "replay of the session's log so far: its run had not ended when the log was written"
	}
	return "replay of the session's log (state: " + state + ")"
}

func (v *Viewer) anonymous() access.Principal { return access.Principal{} }
