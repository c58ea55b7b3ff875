package api

import (
	"errors"
	"net/http"
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
	// NextCursor, when set, fetches the next page (?cursor=). A page
	// with a filter may hold fewer runs than the limit (even none) and
	// still have a next page: a listing examines a bounded number of
	// sessions per request.
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
// folds only the sessions that changed since the last one. It holds at
// most maxSummaries; when full it starts again.
type summaries struct {
	mu sync.Mutex
	m  map[string]RunSummary
}

const maxSummaries = 8192

// scanBudget is how many sessions one listing request examines at most
// beyond its page: filters (repository, state, access) can reject any
// number of sessions in a row, and a request must not walk the whole
// store. When it runs out the page ends early with a cursor to continue.
func scanBudget(limit int) int { return max(1000, 20*limit) }

// List returns the sessions p may read, newest activity first, filtered
// and paginated, from the store's index (store.Store.List): a page costs
// the sessions it examines, not the sessions stored. The cursor is opaque
// to clients: the (last time, session id) key of the last session
// examined, so pages stay stable while new sessions arrive at the top.
func (a *API) List(c *gin.Context, p access.Principal, f ListFilter) (RunList, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	after, err := store.ParseCursor(f.Cursor)
	if err != nil {
		return RunList{}, errBadCursor
	}
	ctx := c.Request.Context()
	out := RunList{Runs: []RunSummary{}}
	budget := scanBudget(f.Limit)
	for examined := 0; ; {
		// One more than the page, to know whether there is a next one.
		infos, err := a.o.Store.List(ctx, store.ListOptions{Limit: min(f.Limit+1, store.MaxListLimit), After: after})
		if err != nil {
			return RunList{}, err
		}
		for _, in := range infos {
			if !f.Since.IsZero() {
				if t, err := time.Parse(event.TimeFormat, in.LastTS); err == nil && t.Before(f.Since) {
					return out, nil // older from here on
				}
			}
			if len(out.Runs) == f.Limit || examined == budget {
				out.NextCursor = after.Encode()
				return out, nil
			}
			examined++
			after = store.CursorOf(in)
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
			out.Runs = append(out.Runs, s)
		}
		if len(infos) < f.Limit+1 {
			return out, nil // the end of the listing
		}
	}
}

var errBadCursor = store.ErrBadCursor

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
	if a.sums.m == nil || len(a.sums.m) >= maxSummaries {
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
