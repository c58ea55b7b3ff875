package fakegithub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"
)

// The app's webhook delivery log, as GitHub keeps it for a GitHub App:
// every attempt to post a delivery (DeliverTo, RedeliverFailed, and the
// redeliveries asked for through the API) is recorded with the status the
// receiver answered, listed newest first by GET /app/hook/deliveries (the
// app's JWT only, cursor pagination in the Link header, status=success or
// failure) and redelivered by POST /app/hook/deliveries/{id}/attempts,
// which posts the delivery again under its GUID (before answering 202:
// the fake has no background queue for it) and records that attempt with
// redelivery true.

// HookAttempt is one recorded attempt to post a delivery.
type HookAttempt struct {
	ID          int64 // the attempt's id in the delivery log
	Delivery    Delivery
	DeliveredAt time.Time
	Redelivery  bool
	StatusCode  int    // 0: no HTTP answer (connection refused, timeout)
	Status      string // "OK", "Invalid HTTP Response: 503", "failed to connect"
	Duration    time.Duration
}

// appDeliveryRoutes are the delivery-log endpoints, kept in this file
// beside their state; routeTable adds them to the fake's table.
var appDeliveryRoutes = map[string]route{
	"GET /app/hook/deliveries":                         {h: listAppHookDeliveries, auth: authJWT},
	"POST /app/hook/deliveries/{delivery_id}/attempts": {h: redeliverAppHookDelivery, auth: authJWT},
	"GET /app/hook/deliveries/{delivery_id}":           {h: getAppHookDelivery, auth: authJWT},
}

// HookAttempts returns the recorded attempts, oldest first.
func (f *Fake) HookAttempts() []HookAttempt {
	f.hooks.mu.Lock()
	defer f.hooks.mu.Unlock()
	return append([]HookAttempt(nil), f.hooks.attempts...)
}

// recordAttempt logs one post of d and its outcome.
func (f *Fake) recordAttempt(d Delivery, redelivery bool, start time.Time, status int, err error) {
	a := HookAttempt{Delivery: d, DeliveredAt: start.UTC(), Redelivery: redelivery, StatusCode: status, Duration: time.Since(start)}
	switch {
	case err != nil && status == 0:
		a.Status = "failed to connect"
	case status/100 == 2:
		a.Status = "OK"
	default:
		a.Status = fmt.Sprintf("Invalid HTTP Response: %d", status)
	}
	f.hooks.mu.Lock()
	defer f.hooks.mu.Unlock()
	a.ID = int64(len(f.hooks.attempts) + 1)
	f.hooks.attempts = append(f.hooks.attempts, a)
}

type hookDeliveryItem struct {
	ID             int64   `json:"id"`
	GUID           string  `json:"guid"`
	DeliveredAt    string  `json:"delivered_at"`
	Redelivery     bool    `json:"redelivery"`
	Duration       float64 `json:"duration"`
	Status         string  `json:"status"`
	StatusCode     int     `json:"status_code"`
	Event          string  `json:"event"`
	Action         *string `json:"action"`
	InstallationID *int64  `json:"installation_id"`
	RepositoryID   *int64  `json:"repository_id"`
}

func (a HookAttempt) item() hookDeliveryItem {
	var p struct {
		Action       *string `json:"action"`
		Installation *struct {
			ID int64 `json:"id"`
		} `json:"installation"`
		Repository *struct {
			ID int64 `json:"id"`
		} `json:"repository"`
	}
	_ = json.Unmarshal(a.Delivery.Body, &p)
	it := hookDeliveryItem{ID: a.ID, GUID: a.Delivery.ID, DeliveredAt: a.DeliveredAt.Format(time.RFC3339), Redelivery: a.Redelivery,
		Duration: a.Duration.Seconds(), Status: a.Status, StatusCode: a.StatusCode, Event: a.Delivery.Event, Action: p.Action}
	if p.Installation != nil {
		it.InstallationID = &p.Installation.ID
	}
	if p.Repository != nil {
		it.RepositoryID = &p.Repository.ID
	}
	return it
}

// listAppHookDeliveries: newest first; cursor is the id of the first
// attempt of the page (as GitHub's cursors, opaque to the client).
func listAppHookDeliveries(c *call) {
	q := c.r.URL.Query()
	perPage := 30
	if s := q.Get("per_page"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeError(c.w, http.StatusBadRequest, "per_page must be a positive integer")
			return
		}
		perPage = min(n, 100)
	}
	status := q.Get("status")
	if status != "" && status != "success" && status != "failure" {
		writeError(c.w, http.StatusUnprocessableEntity, "status must be success or failure")
		return
	}
	c.f.hooks.mu.Lock()
	all := append([]HookAttempt(nil), c.f.hooks.attempts...)
	c.f.hooks.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].ID > all[j].ID })
	var list []HookAttempt
	for _, a := range all {
		ok := a.StatusCode/100 == 2
		if status == "success" && !ok || status == "failure" && ok {
			continue
		}
		list = append(list, a)
	}
	start := 0
	if cur := q.Get("cursor"); cur != "" {
		id, err := strconv.ParseInt(cur, 10, 64)
		if err != nil {
			writeError(c.w, http.StatusBadRequest, "invalid cursor")
			return
		}
		start = len(list)
		for i, a := range list {
			if a.ID <= id {
				start = i
				break
			}
		}
	}
	end := min(start+perPage, len(list))
	items := make([]hookDeliveryItem, 0, end-start)
	for _, a := range list[start:end] {
		items = append(items, a.item())
	}
	if end < len(list) {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("per_page", strconv.Itoa(perPage))
		next.Set("cursor", strconv.FormatInt(list[end].ID, 10))
		u := url.URL{Scheme: "http", Host: c.r.Host, Path: c.r.URL.Path, RawQuery: next.Encode()}
		c.w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, u.String()))
	}
	writeJSON(c.w, http.StatusOK, items)
}

func (c *call) attempt() (HookAttempt, bool) {
	id, err := strconv.ParseInt(c.params["delivery_id"], 10, 64)
	if err != nil {
		writeError(c.w, http.StatusBadRequest, "delivery_id must be an integer")
		return HookAttempt{}, false
	}
	c.f.hooks.mu.Lock()
	defer c.f.hooks.mu.Unlock()
	for _, a := range c.f.hooks.attempts {
		if a.ID == id {
			return a, true
		}
	}
	writeError(c.w, http.StatusNotFound, "Not Found")
	return HookAttempt{}, false
}

func getAppHookDelivery(c *call) {
	a, ok := c.attempt()
	if !ok {
		return
	}
	it := a.item()
	writeJSON(c.w, http.StatusOK, map[string]any{
		"id": it.ID, "guid": it.GUID, "delivered_at": it.DeliveredAt, "redelivery": it.Redelivery, "duration": it.Duration,
		"status": it.Status, "status_code": it.StatusCode, "event": it.Event, "action": it.Action,
		"installation_id": it.InstallationID, "repository_id": it.RepositoryID,
		"request":  map[string]any{"headers": map[string]any{"X-GitHub-Event": it.Event, "X-GitHub-Delivery": it.GUID}, "payload": json.RawMessage(a.Delivery.Body)},
		"response": map[string]any{"headers": map[string]any{}, "payload": nil},
	})
}

// redeliverAppHookDelivery posts the attempt's delivery again to the
// webhook URL under its GUID and records the attempt.
func redeliverAppHookDelivery(c *call) {
	a, ok := c.attempt()
	if !ok {
		return
	}
	c.f.hooks.mu.Lock()
	target, secret := c.f.hooks.url, c.f.hooks.secret
	c.f.hooks.mu.Unlock()
	if target == "" {
		writeError(c.w, http.StatusUnprocessableEntity, "the app has no webhook URL")
		return
	}
	client := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	status, err := postStatus(c.r.Context(), client, target, secret, a.Delivery)
	c.f.recordAttempt(a.Delivery, true, start, status, err)
	writeJSON(c.w, http.StatusAccepted, map[string]any{})
}
