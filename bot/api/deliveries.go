package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/gin-gonic/gin"
)

// DeliveryView is one delivery in GET /v1/deliveries (no body: it holds
// the repository's content).
type DeliveryView struct {
	ID         string    `json:"id"`
	Event      string    `json:"event"`
	Action     string    `json:"action,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	Attempts   int       `json:"attempts"`
	State      string    `json:"state"`
	Outcome    string    `json:"outcome,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// listDeliveries answers GET /v1/deliveries?state=dead|pending|claimed|done
// [&limit=N]: the deliveries in that state, oldest first.
func (a *API) listDeliveries(c *gin.Context) {
	if a.o.Deliveries == nil {
		Abort(c, http.StatusNotFound, "no_queue", "this server has no webhook queue (webhook intake is off)")
		return
	}
	state := c.Query("state")
	if state == "" {
		Abort(c, http.StatusBadRequest, "bad_request", "give state: one of "+strings.Join(queue.DeliveryStates, ", "))
		return
	}
	limit := 100
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > queue.MaxListed {
			Abort(c, http.StatusBadRequest, "bad_request", "limit must be 1-"+strconv.Itoa(queue.MaxListed))
			return
		}
		limit = n
	}
	valid := false
	for _, s := range queue.DeliveryStates {
		valid = valid || s == state
	}
	if !valid {
		Abort(c, http.StatusBadRequest, "bad_request", "unknown state "+strconv.Quote(state)+": one of "+strings.Join(queue.DeliveryStates, ", "))
		return
	}
	recs, err := a.o.Deliveries.List(c.Request.Context(), state, limit)
	if err != nil {
		a.log.Error("list deliveries", "state", state, "err", err)
		Abort(c, http.StatusServiceUnavailable, "unavailable", "could not read the delivery queue")
		return
	}
	out := make([]DeliveryView, len(recs))
	for i, r := range recs {
		out[i] = DeliveryView{ID: r.ID, Event: r.Event, Action: r.Action, ReceivedAt: r.ReceivedAt.UTC(), Attempts: r.Attempts, State: r.State, Outcome: r.Outcome, Error: r.Error}
	}
	c.JSON(http.StatusOK, gin.H{"state": state, "deliveries": out})
}
