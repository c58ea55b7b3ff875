package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/gin-gonic/gin"
)

// identify resolves the caller of a read; it answers the request itself
// (400, 401) and returns false when the credentials are unusable.
func (a *API) identify(c *gin.Context) (access.Principal, bool) {
	p, err := a.o.Access.Identify(c.Request)
	switch {
	case errors.Is(err, access.ErrTokenInQuery):
		Abort(c, http.StatusBadRequest, "token_in_query", err.Error())
		return p, false
	case errors.Is(err, access.ErrGitHubUnavailable):
		// Not the caller's fault, and not a "no": retry later.
		c.Header("Retry-After", "5")
		Abort(c, http.StatusServiceUnavailable, "github_unavailable", access.ErrGitHubUnavailable.Error())
		return p, false
	case errors.Is(err, access.ErrUserTokenRejected):
		c.Header("WWW-Authenticate", `Bearer realm="agentos", error="invalid_token", error_description="expired or revoked"`)
		Abort(c, http.StatusUnauthorized, "token_rejected", err.Error())
		return p, false
	case err != nil:
		c.Header("WWW-Authenticate", `Bearer realm="agentos", error="invalid_token"`)
		Abort(c, http.StatusUnauthorized, "invalid_token", err.Error())
		return p, false
	}
	return p, true
}

// mayRead reports whether p may read the session evs (empty: a session
// only queued, which only operators see).
func (a *API) mayRead(c *gin.Context, p access.Principal, evs []event.Event) bool {
	return a.o.Access.Allowed(c.Request.Context(), p, access.RepoOf(evs), access.Read)
}

// RunSummary is one session in GET /v1/runs.
type RunSummary struct {
	SessionID string `json:"session_id"`
	// Repository is "owner/name" for sessions started from GitHub.
	Repository string `json:"repository,omitempty"`
	// State is the latest run's status: running, paused, completed,
	// failed, denied, cancelled ("" before any run).
	State       string  `json:"state"`
	Prompt      string  `json:"prompt,omitempty"`
	Events      int64   `json:"events"`
	StartedAt   string  `json:"started_at"`
	UpdatedAt   string  `json:"updated_at"`
	LastType    string  `json:"last_type"`
	Pending     int     `json:"pending_approvals"`
	CostUSD     float64 `json:"cost_usd"`
	TraceID     string  `json:"trace_id,omitempty"`
	SnapshotURL string  `json:"snapshot_url"`
	PageURL     string  `json:"page_url"`
}

// RunList is the body of GET /v1/runs.
type RunList struct {
	Runs []RunSummary `json:"runs"`
	// NextCursor, when set, fetches the next page (?cursor=).
	NextCursor string `json:"next_cursor,omitempty"`
}

// ListFilter selects sessions for a listing.
type ListFilter struct {
	Repository string    // "owner/name", case-insensitive; "" any
	State      string    // "" any
	Since      time.Time // updated at or after; zero: any
	Limit      int       // 1..200, default 50
	Cursor     string    // from a previous page
}

// summaries caches session summaries by (session, last seq): a listing
// folds only the sessions that changed since the last one.
type summaries struct {
	mu sync.Mutex
	m  map[string]RunSummary
}

// List returns the sessions p may read, newest activity first, filtered
// and paginated. The cursor is opaque to clients: the (updated_at,
// session_id) of the page's last row, so pages stay stable while new
// sessions arrive at the top.
func (a *API) List(c *gin.Context, p access.Principal, f ListFilter) (RunList, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	var curTS, curID string
	if f.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(f.Cursor)
		ts, id, ok := strings.Cut(string(b), "\x00")
		if err != nil || !ok {
			return RunList{}, errBadCursor
		}
		curTS, curID = ts, id
	}
	ctx := c.Request.Context()
	infos, err := a.o.Store.Sessions(ctx)
	if err != nil {
		return RunList{}, err
	}
	sort.Slice(infos, func(i, j int) bool {
		if infos[i].LastTS != infos[j].LastTS {
			return infos[i].LastTS > infos[j].LastTS
		}
		return infos[i].SessionID > infos[j].SessionID
	})
	out := RunList{Runs: []RunSummary{}}
	for _, in := range infos {
		if curTS != "" && (in.LastTS > curTS || (in.LastTS == curTS && in.SessionID >= curID)) {
			continue
		}
		if !f.Since.IsZero() {
			if t, err := time.Parse(event.TimeFormat, in.LastTS); err == nil && t.Before(f.Since) {
				continue
			}
		}
		s, err := a.summary(c, in)
		if err != nil {
			return RunList{}, err
		}
		if f.Repository != "" && !strings.EqualFold(s.Repository, f.Repository) {
			continue
		}
		if f.State != "" && s.State != f.State {
			continue
		}
		if !a.o.Access.Allowed(ctx, p, s.Repository, access.Read) {
			continue
		}
		if len(out.Runs) == f.Limit {
			last := out.Runs[len(out.Runs)-1]
			out.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(last.UpdatedAt + "\x00" + last.SessionID))
			break
		}
		out.Runs = append(out.Runs, s)
	}
	return out, nil
}

var errBadCursor = errors.New("cursor is not one this server handed out")

func (a *API) summary(c *gin.Context, in store.SessionInfo) (RunSummary, error) {
	a.sums.mu.Lock()
	s, ok := a.sums.m[in.SessionID]
	a.sums.mu.Unlock()
	if ok && s.Events == in.LastSeq {
		return s, nil
	}
	evs, err := a.o.Store.Read(c.Request.Context(), in.SessionID, 1)
	if err != nil {
		return RunSummary{}, err
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return RunSummary{}, err
	}
	s = RunSummary{
		SessionID: in.SessionID, Repository: access.RepoOf(evs), State: string(snap.RunStatus), Prompt: snap.Prompt,
		Events: snap.LastSeq, StartedAt: in.FirstTS, UpdatedAt: in.LastTS, LastType: in.LastType,
		Pending: len(snap.PendingApprovals), CostUSD: snap.Usage.CostUSD, TraceID: TraceIDOf(evs),
		SnapshotURL: "/v1/runs/" + in.SessionID, PageURL: "/runs/" + in.SessionID,
	}
	if snap.LastSeq != in.LastSeq { // appended between Sessions and Read
		s.Events = snap.LastSeq
		s.UpdatedAt = evs[len(evs)-1].TS
	}
	a.sums.mu.Lock()
	if a.sums.m == nil {
		a.sums.m = map[string]RunSummary{}
	}
	a.sums.m[in.SessionID] = s
	a.sums.mu.Unlock()
	return s, nil
}

// TraceIDOf is the trace id the session's first session.start records
// ("" without one).
func TraceIDOf(evs []event.Event) string {
	for i := range evs {
		if evs[i].Type == event.SessionStart {
			return event.FieldString(evs[i].Payload, "trace_id")
		}
	}
	return ""
}

// ParseListFilter reads the query of a listing: repository, state, since
// (RFC 3339), limit (1-200) and cursor.
func ParseListFilter(c *gin.Context) (ListFilter, error) {
	f := ListFilter{Repository: strings.TrimSpace(c.Query("repository")), State: strings.TrimSpace(c.Query("state")), Cursor: c.Query("cursor")}
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return f, errors.New("since must be an RFC 3339 time such as 2026-11-25T09:00:00Z, not " + strconv.Quote(v))
		}
		f.Since = t
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return f, errors.New("limit must be 1-200, not " + strconv.Quote(v))
		}
		f.Limit = n
	}
	switch f.State {
	case "", "running", "paused", "completed", "failed", "denied", "cancelled", StateQueued:
	default:
		return f, errors.New("state must be running, paused, completed, failed, denied or cancelled, not " + strconv.Quote(f.State))
	}
	return f, nil
}

func (a *API) list(c *gin.Context) {
	p, ok := a.identify(c)
	if !ok {
		return
	}
	f, err := ParseListFilter(c)
	if err != nil {
		Abort(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	out, err := a.List(c, p, f)
	switch {
	case errors.Is(err, errBadCursor):
		Abort(c, http.StatusBadRequest, "bad_cursor", err.Error())
	case err != nil:
		a.internal(c, "list sessions", err)
	default:
		c.JSON(http.StatusOK, out)
	}
}

// Access is the API's read checker (shared with the viewer pages).
func (a *API) Access() *access.Checker { return a.o.Access }

// Store is the API's event store.
func (a *API) Store() store.Store { return a.o.Store }
