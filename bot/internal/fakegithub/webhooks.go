package fakegithub

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Webhooks: what GitHub sends when something happens through the API or
// git. Every comment, review, pull request change and push to a pull
// request's head made against the fake is recorded as the delivery GitHub
// would send (the bot's own actions included: GitHub delivers those too),
// with the installation when the repository has one, as an app receives
// it. Tests take them with Deliveries; DeliverTo posts them to a webhook
// URL, signed as GitHub signs them. Seeding methods (AddComment,
// AddPullRequest…) deliver nothing.

// Delivery is one webhook delivery.
type Delivery struct {
	ID    string // X-GitHub-Delivery, a GUID
	Event string // X-GitHub-Event
	Body  []byte
}

// Action returns the payload's "action".
func (d Delivery) Action() string {
	var p struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(d.Body, &p)
	return p.Action
}

// Sender returns the payload's sender login.
func (d Delivery) Sender() string {
	var p struct {
		Sender struct {
			Login string `json:"login"`
		} `json:"sender"`
	}
	_ = json.Unmarshal(d.Body, &p)
	return p.Sender.Login
}

// Sign returns the X-Hub-Signature-256 header value of body for secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// hooks is the fake's webhook state.
type hooks struct {
	all []Delivery

	mu     sync.Mutex // guards the sender below
	url    string
	secret []byte
	next   int // index in all of the next delivery to post
	wake   chan struct{}
	stop   context.CancelFunc
	done   chan struct{}
	errs   []error
	failed []Delivery // posted and not accepted: what "Redeliver" would resend
	// attempts is the app's delivery log (appdeliveries.go).
	attempts []HookAttempt
}

// Deliveries returns every delivery so far, oldest first.
func (f *Fake) Deliveries() []Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Delivery(nil), f.hooks.all...)
}

// DeliveriesSince returns the deliveries after the first n (n from a
// previous len(Deliveries())).
func (f *Fake) DeliveriesSince(n int) []Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n > len(f.hooks.all) {
		n = len(f.hooks.all)
	}
	return append([]Delivery(nil), f.hooks.all[n:]...)
}

// DeliverTo posts every delivery from now on to url with the headers
// GitHub sends (X-GitHub-Event, X-GitHub-Delivery, X-Hub-Signature-256
// with secret), one at a time and in order, from a background goroutine
// that Close stops. GitHub does not retry a failed delivery; neither does
// the fake (DeliveryErrors lists the failures).
func (f *Fake) DeliverTo(url string, secret []byte) {
	f.mu.Lock()
	from := len(f.hooks.all)
	f.mu.Unlock()
	h := &f.hooks
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stop != nil {
		h.url, h.secret = url, secret
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.url, h.secret, h.next, h.stop = url, secret, from, cancel
	h.wake, h.done = make(chan struct{}, 1), make(chan struct{})
	go f.deliverLoop(ctx)
}

// DeliveryErrors returns the deliveries DeliverTo could not post.
func (f *Fake) DeliveryErrors() []error {
	f.hooks.mu.Lock()
	defer f.hooks.mu.Unlock()
	return append([]error(nil), f.hooks.errs...)
}

// Close stops posting deliveries (after the one in flight).
func (f *Fake) Close() {
	h := &f.hooks
	h.mu.Lock()
	stop, done := h.stop, h.done
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (f *Fake) deliverLoop(ctx context.Context) {
	h := &f.hooks
	defer close(h.done)
	client := &http.Client{Timeout: 10 * time.Second} // GitHub gives up after 10 s
	for {
		f.mu.Lock()
		h.mu.Lock()
		var d *Delivery
		if h.next < len(h.all) {
			d = &h.all[h.next]
			h.next++
		}
		url, secret := h.url, h.secret
		h.mu.Unlock()
		f.mu.Unlock()
		if d == nil {
			select {
			case <-ctx.Done():
				return
			case <-h.wake:
			}
			continue
		}
		start := time.Now()
		status, err := postStatus(ctx, client, url, secret, *d)
		if ctx.Err() == nil {
			f.recordAttempt(*d, false, start, status, err)
		}
		if err != nil {
			h.mu.Lock()
			h.errs = append(h.errs, err)
			h.failed = append(h.failed, *d)
			h.mu.Unlock()
		}
	}
}

// RedeliverFailed posts again, synchronously and in order, every delivery
// that failed, with its original X-GitHub-Delivery GUID, as a maintainer's
// "Redeliver" in the webhook settings (or the redelivery API) does; GitHub
// never does it by itself. It returns the deliveries still failing, which
// stay queued for the next call.
func (f *Fake) RedeliverFailed(ctx context.Context) []error {
	h := &f.hooks
	h.mu.Lock()
	todo, url, secret := h.failed, h.url, h.secret
	h.failed = nil
	h.mu.Unlock()
	client := &http.Client{Timeout: 10 * time.Second}
	var errs []error
	var again []Delivery
	for _, d := range todo {
		start := time.Now()
		status, err := postStatus(ctx, client, url, secret, d)
		f.recordAttempt(d, true, start, status, err)
		if err != nil {
			errs = append(errs, err)
			again = append(again, d)
		}
	}
	h.mu.Lock()
	h.failed = append(again, h.failed...)
	h.mu.Unlock()
	return errs
}

// postStatus posts d and returns the receiver's status code (0 without
// an answer) with post's error.
func postStatus(ctx context.Context, client *http.Client, url string, secret []byte, d Delivery) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.Body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	req.Header.Set("X-GitHub-Event", d.Event)
	req.Header.Set("X-GitHub-Delivery", d.ID)
	req.Header.Set("X-Hub-Signature-256", Sign(secret, d.Body))
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("delivery %s (%s): %w", d.ID, d.Event, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("delivery %s (%s): %s", d.ID, d.Event, resp.Status)
	}
	return resp.StatusCode, nil
}

func guid() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// deliver records a delivery (f.mu held). The payload gets repository,
// sender and, for an installed repository, installation.
func (f *Fake) deliver(rs *repoState, event, sender string, payload map[string]any) {
	payload["repository"] = f.repoJSON(rs)
	payload["sender"] = f.userJSON(sender)
	if rs.installationID != 0 {
		payload["installation"] = map[string]any{"id": rs.installationID, "node_id": fmt.Sprintf("MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u%d", rs.installationID)}
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return // maps of JSON values always marshal
	}
	f.hooks.all = append(f.hooks.all, Delivery{ID: guid(), Event: event, Body: body})
	f.hooks.mu.Lock()
	if f.hooks.wake != nil {
		select {
		case f.hooks.wake <- struct{}{}:
		default:
		}
	}
	f.hooks.mu.Unlock()
}

func (f *Fake) deliverComment(rs *repoState, action, sender string, cm *Comment) {
	is := rs.issues[cm.Issue]
	if is == nil {
		return
	}
	f.deliver(rs, "issue_comment", sender, map[string]any{"action": action, "issue": f.issueJSON(rs, is), "comment": f.commentJSON(rs, cm)})
}

func (f *Fake) deliverReview(rs *repoState, action, sender string, p *PullRequest, rv *Review) {
	review := f.reviewJSON(rs, rv)
	review["state"] = strings.ToLower(rv.State) // webhooks spell it lower-case
	f.deliver(rs, "pull_request_review", sender, map[string]any{"action": action, "review": review, "pull_request": f.prJSON(rs, p)})
}

func (f *Fake) deliverPR(rs *repoState, action, sender string, p *PullRequest, extra map[string]any) {
	payload := map[string]any{"action": action, "number": p.Number, "pull_request": f.prJSON(rs, p)}
	for k, v := range extra {
		payload[k] = v
	}
	f.deliver(rs, "pull_request", sender, payload)
}

// pushed delivers pull_request synchronize for every open pull request
// whose head branch a git push moved.
func (f *Fake) pushed(repoKey, pusher string, before, after map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs := f.repos[repoKey]
	if rs == nil {
		return
	}
	for branch, sha := range after {
		rs.refs["refs/heads/"+branch] = sha
	}
	for _, n := range sortedPRs(rs) {
		p := rs.prs[n]
		if p.State != "open" || p.HeadRepo != "" {
			continue
		}
		if was, now := before[p.Head], after[p.Head]; now != "" && was != now {
			p.Updated = f.now()
			f.deliverPR(rs, "synchronize", pusher, p, map[string]any{"before": was, "after": now})
		}
	}
}

func sortedPRs(rs *repoState) []int {
	nums := make([]int, 0, len(rs.prs))
	for n := range rs.prs {
		nums = append(nums, n)
	}
	for i := 1; i < len(nums); i++ {
		for j := i; j > 0 && nums[j] < nums[j-1]; j-- {
			nums[j], nums[j-1] = nums[j-1], nums[j]
		}
	}
	return nums
}
