package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/gin-gonic/gin"
)

// Canceller is the part of Runs that cancels a session's run (POST
// /v1/runs/:id/cancel). It is the RunManager's one cancel path, the same
// as /agent cancel and a closed pull request: a running run stops (a tool
// call in flight is let finish or killed, and the log says which), a
// paused run's approvals are cancelled; either ends with run.cancelled and
// a cancelled terminal report. Errors wrap run.ErrNotPaused when the
// session has no run to cancel.
type Canceller interface {
	Cancel(ctx context.Context, sessionID, by, reason string) (agentrun.Outcome, error)
}

// ErrCancelRequested is returned by a Canceller whose run is worked by
// another replica: that replica was asked to cancel it and does within
// seconds. The API answers 202 Accepted.
var ErrCancelRequested = errors.New("the run is worked by another replica, which was asked to cancel it")

// cancelRequest is the body of POST /v1/runs/:id/cancel.
type cancelRequest struct {
	By     string `json:"by"`
	Reason string `json:"reason,omitempty"`
}

type cancelResponse struct {
	SessionID string           `json:"session_id"`
	RunID     string           `json:"run_id,omitempty"`
	Status    string           `json:"status"`
	Terminal  *agentrun.Report `json:"terminal,omitempty"`
}

func (a *API) cancelRun(c *gin.Context) {
	cn, ok := a.o.Runs.(Canceller)
	if a.o.Runs == nil || !ok {
		Abort(c, http.StatusServiceUnavailable, "runs_unavailable", "this server does not cancel runs")
		return
	}
	sid := c.Param("id")
	if !ValidSessionID(sid) {
		Abort(c, http.StatusNotFound, "unknown_session", "no session "+sid)
		return
	}
	var req cancelRequest
	if err := decode(c, &req); err != nil {
		Abort(c, http.StatusBadRequest, "bad_request", "body: "+err.Error())
		return
	}
	req.By = strings.TrimSpace(req.By)
	if req.By == "" {
		Abort(c, http.StatusBadRequest, "bad_request", "by is required (who cancels)")
		return
	}
	ctx := c.Request.Context()
	evs, err := a.o.Store.Read(ctx, sid, 1)
	if err != nil {
		a.internal(c, "read session", err)
		return
	}
	if len(evs) == 0 && !a.runs.active(sid) {
		Abort(c, http.StatusNotFound, "unknown_session", "no session "+sid)
		return
	}
	out, err := cn.Cancel(ctx, sid, req.By, req.Reason)
	switch {
	case errors.Is(err, ErrCancelRequested):
		c.JSON(http.StatusAccepted, cancelResponse{SessionID: sid, RunID: out.RunID, Status: string(agentrun.StatusRunning)})
		return
	case errors.Is(err, agentrun.ErrNotPaused):
		Abort(c, http.StatusConflict, "not_cancellable", fmt.Sprintf("session %s has no running or paused run to cancel (a queued run can be cancelled once it starts)", sid))
		return
	case err != nil:
		a.internal(c, "cancel run", err)
		return
	}
	c.JSON(http.StatusOK, cancelResponse{SessionID: sid, RunID: out.RunID, Status: string(out.Status), Terminal: out.Terminal})
}
