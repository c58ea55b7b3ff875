package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/gin-gonic/gin"
)

// Header names GitHub sends with a delivery.
const (
	EventHeader    = "X-GitHub-Event"
	DeliveryHeader = "X-GitHub-Delivery"
)

// DefaultMaxBody is GitHub's payload cap (25 MB).
const DefaultMaxBody = 25 << 20

// Config configures the Handler.
type Config struct {
	Secrets [][]byte     // one or two (rotation)
	MaxBody int64        // default 25 MiB (GitHub's cap)
	Logger  *slog.Logger // optional; store failures (503) are logged here
	// Events are the events the bot acts on (dispatch.Events, from the
	// route table); deliveries of any other event are answered 400.
	Events Events
}

// Observer receives one call per delivery outcome (a metrics hook). event
// is the X-GitHub-Event value if the bot handles that event, "other"
// otherwise (the header is caller-controlled; labels must stay bounded).
// Handler outcomes: accepted, duplicate, unauthorized, bad_request,
// too_large, ping, unsupported, unavailable. Outcomes of bot/worker's
// Processor: processed, ignored, failed, retry.
type Observer interface {
	Delivery(event, outcome string)
}

// Handler is the webhook endpoint.
type Handler struct {
	cfg      Config
	q        queue.Queue
	obs      Observer
	now      func() time.Time
	tooLarge string
}

// NewHandler returns a handler storing deliveries in q. obs may be nil.
func NewHandler(cfg Config, q queue.Queue, obs Observer) *Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	return &Handler{cfg: cfg, q: q, obs: obs, now: time.Now, tooLarge: fmt.Sprintf("body larger than %d bytes", cfg.MaxBody)}
}

var (
	respAccepted  = []byte(`{"accepted":true}`)
	respDuplicate = []byte(`{"duplicate":true}`)
	respPing      = []byte(`{"ping":true}`)
)

const jsonType = "application/json; charset=utf-8"

// Serve handles one delivery; mount it as POST on the webhook path.
func (h *Handler) Serve(c *gin.Context) {
	r := c.Request
	event := r.Header.Get(EventHeader)
	label := h.cfg.Events.Label(event)
	if r.ContentLength > h.cfg.MaxBody {
		h.fail(c, label, http.StatusRequestEntityTooLarge, "too_large", h.tooLarge, "")
		return
	}
	buf := getBodyBuf(r.ContentLength)
	defer putBodyBuf(buf)
	body, err := readBody(http.MaxBytesReader(c.Writer, r.Body, h.cfg.MaxBody), (*buf)[:0])
	*buf = body[:0]
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.fail(c, label, http.StatusRequestEntityTooLarge, "too_large", h.tooLarge, "")
			return
		}
		h.fail(c, label, http.StatusBadRequest, "bad_request", "could not read body", "")
		return
	}
	if err := Verify(h.cfg.Secrets, body, r.Header.Get(SignatureHeader)); err != nil {
		h.fail(c, label, http.StatusUnauthorized, "unauthorized", err.Error(), "")
		return
	}
	id := r.Header.Get(DeliveryHeader)
	if !validDeliveryID(id) {
		h.fail(c, label, http.StatusBadRequest, "bad_request", "missing or invalid "+DeliveryHeader, "")
		return
	}
	switch {
	case event == "":
		h.fail(c, label, http.StatusBadRequest, "bad_request", "missing "+EventHeader, "")
		return
	case event == "ping":
		h.observe(label, "ping")
		c.Data(http.StatusOK, jsonType, respPing)
		return
	case !h.cfg.Events.Has(event):
		h.fail(c, label, http.StatusBadRequest, "unsupported", "unsupported event", event)
		return
	}
	if isForm(r.Header.Get("Content-Type")) {
		if body, err = formPayload(body); err != nil {
			h.fail(c, label, http.StatusBadRequest, "bad_request", err.Error(), event)
			return
		}
	}
	action, err := routeAction(body)
	if err != nil {
		h.fail(c, label, http.StatusBadRequest, "bad_request", "malformed JSON payload: "+err.Error(), event)
		return
	}
	// The request's context ends if GitHub hangs up; the store then still
	// finishes a write it began, and the redelivery is a duplicate.
	// A replay of a signed body under a new delivery ID is a duplicate
	// too: the queue also knows each delivery by its payload's own ids.
	key := PayloadKey(event, action, body)
	dup, err := h.q.Enqueue(r.Context(), queue.Delivery{ID: id, Event: event, Action: action, Key: key, Body: body, ReceivedAt: h.now()})
	switch {
	case errors.Is(err, context.Canceled):
		h.fail(c, label, http.StatusServiceUnavailable, "unavailable", "request ended before the delivery was stored", event)
	case err != nil:
		if h.cfg.Logger != nil {
			h.cfg.Logger.Error("webhook: store delivery", "delivery", id, "event", event, "err", err)
		}
		h.fail(c, label, http.StatusServiceUnavailable, "unavailable", "could not store the delivery", event)
	case dup:
		h.observe(label, "duplicate")
		c.Data(http.StatusOK, jsonType, respDuplicate)
	default:
		h.observe(label, "accepted")
		c.Data(http.StatusAccepted, jsonType, respAccepted)
	}
}

func (h *Handler) observe(event, outcome string) {
	if h.obs != nil {
		h.obs.Delivery(event, outcome)
	}
}

type errorBody struct {
	Error string `json:"error"`
	Event string `json:"event,omitempty"`
}

func (h *Handler) fail(c *gin.Context, label string, status int, outcome, msg, event string) {
	h.observe(label, outcome)
	b, err := json.Marshal(errorBody{Error: msg, Event: event})
	if err != nil { // cannot happen for two strings; keep a valid answer anyway
		b = []byte(`{"error":"internal"}`)
	}
	c.Data(status, jsonType, b)
}

// Body buffers are reused across deliveries (the queue copies what it
// stores); those larger than maxPooledBody are left to the collector.
const maxPooledBody = 256 << 10

var bodyBufs = sync.Pool{New: func() any { return new([]byte) }}

// getBodyBuf returns an empty buffer for a body of contentLength bytes
// (unknown: -1), with room for one more so that EOF is seen without
// growing.
func getBodyBuf(contentLength int64) *[]byte {
	n := 512
	if contentLength > 0 {
		n = int(contentLength) + 1 // Serve refused bodies over MaxBody
	}
	if n > maxPooledBody {
		b := make([]byte, 0, n) // never taken from the pool, nor put back
		return &b
	}
	buf := bodyBufs.Get().(*[]byte)
	if cap(*buf) < n {
		*buf = make([]byte, 0, n)
	}
	return buf
}

func putBodyBuf(buf *[]byte) {
	if cap(*buf) > maxPooledBody {
		*buf = nil
	}
	*buf = (*buf)[:0]
	bodyBufs.Put(buf)
}

// readBody appends all of r to b.
func readBody(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// validDeliveryID accepts GitHub's GUIDs and anything of the same spirit:
// 1–128 printable ASCII characters without spaces.
func validDeliveryID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

func isForm(contentType string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(contentType)), "application/x-www-form-urlencoded")
}

// formPayload extracts the JSON of a webhook sent as a form (a repository
// hook with content type application/x-www-form-urlencoded); the signature
// covers the form body, which has already been verified.
func formPayload(body []byte) ([]byte, error) {
	v, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, errors.New("malformed form body: " + err.Error())
	}
	p := v.Get("payload")
	if p == "" {
		return nil, errors.New(`form body without "payload"`)
	}
	return []byte(p), nil
}
