package fakegithub

import (
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"time"
)

// GitHub App user authorization for headless clients (the OAuth device
// flow), as github.com serves it outside the REST API:
//
//   - POST /login/device/code (client_id): a device_code (40 characters),
//     a user_code ("WDJB-MJHT"), verification_uri (WEB/login/device),
//     expires_in (900) and interval (5). An unknown client_id is a 404; an
//     app whose "Enable Device Flow" setting is off answers
//     device_flow_disabled.
//   - The user enters the user_code at /login/device (POST user_code and
//     authorize=1 or cancel=1 from the browser signed in with
//     SignInBrowser; tests call EnterDeviceCode/CancelDeviceCode). A user
//     code is good once.
//   - POST /login/oauth/access_token (client_id, device_code, grant_type
//     urn:ietf:params:oauth:grant-type:device_code; no client secret):
//     until the user answers, 200 with error authorization_pending; a poll
//     sooner than interval after the previous one answers slow_down and
//     adds 5 seconds to the interval (returned as "interval"); then the
//     token (ghu_…, eight hours), once: the device code is spent. Other
//     errors: expired_token (after expires_in), access_denied (the user
//     cancelled; for good), incorrect_device_code (unknown, spent, or
//     another app's), incorrect_client_credentials (unknown client_id),
//     unsupported_grant_type, device_flow_disabled.
//
// Times follow the fake's clock (SetClock), so a client under test can
// sleep on the same clock.

// DeviceGrantType is the grant_type of the device flow's token request.
const DeviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

// Device flow defaults, as GitHub documents them.
const (
	DeviceCodeLifetime = 15 * time.Minute
	DeviceInterval     = 5 * time.Second
	deviceSlowDownStep = 5 * time.Second
)

type deviceState int

const (
	devicePending deviceState = iota
	deviceAuthorized
	deviceDenied
)

type deviceAuth struct {
	client   string
	userCode string
	expires  time.Time
	interval time.Duration
	lastPoll time.Time
	state    deviceState
	login    string
}

// Errors of EnterDeviceCode and CancelDeviceCode.
var (
	ErrUnknownUserCode = errors.New("fakegithub: no such user code, or it expired or was used")
	ErrNotSignedIn     = errors.New("fakegithub: nobody is signed in to the browser")
)

// serveDevice answers the device flow's endpoints; it returns false for
// every other request. The token request shares /login/oauth/access_token
// with the web flow: oauthAccessToken hands device grants to
// deviceAccessToken.
func (f *Fake) serveDevice(w http.ResponseWriter, r *http.Request) bool {
	switch r.URL.Path {
	case "/login/device/code":
		f.deviceCode(w, r)
	case "/login/device":
		f.deviceVerify(w, r)
	default:
		return false
	}
	return true
}

func (f *Fake) deviceCode(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	_ = r.ParseForm()
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := Request{Method: r.Method, Path: r.URL.Path, Op: "oauth device code", Status: http.StatusOK}
	defer func() { f.requests = append(f.requests, rec) }()
	c := f.oauthClients[r.Form.Get("client_id")]
	if c == nil {
		rec.Status = http.StatusNotFound
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	if !c.DeviceFlow {
		oauthReply(w, r, map[string]any{"error": "device_flow_disabled", "error_description": "Device Flow must be explicitly enabled for this App", "error_uri": "https://docs.github.com"})
		return
	}
	if f.devices == nil {
		f.devices = map[string]*deviceAuth{}
	}
	dc := randomHex(20) // 40 characters
	d := &deviceAuth{client: c.ClientID, userCode: f.newUserCode(), expires: f.now().Add(DeviceCodeLifetime), interval: DeviceInterval}
	f.devices[dc] = d
	oauthReply(w, r, map[string]any{
		"device_code": dc, "user_code": d.userCode, "verification_uri": f.webURL() + "/login/device",
		"expires_in": int(DeviceCodeLifetime / time.Second), "interval": int(DeviceInterval / time.Second),
	})
}

// userCodeAlphabet leaves out letters people confuse with digits.
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ0123456789"

func (f *Fake) newUserCode() string {
	for {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		for i := range b {
			b[i] = userCodeAlphabet[int(b[i])%len(userCodeAlphabet)]
		}
		code := string(b[:4]) + "-" + string(b[4:])
		if f.deviceByUserCode(code) == nil {
			return code
		}
	}
}

func (f *Fake) deviceByUserCode(code string) *deviceAuth {
	code = strings.ToUpper(strings.TrimSpace(code))
	for _, d := range f.devices {
		if d.userCode == code {
			return d
		}
	}
	return nil
}

// EnterDeviceCode is login entering userCode at /login/device and
// authorizing the app.
func (f *Fake) EnterDeviceCode(login, userCode string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answerDevice(login, userCode, deviceAuthorized)
}

// CancelDeviceCode is login entering userCode and clicking Cancel: the
// client's next poll gets access_denied.
func (f *Fake) CancelDeviceCode(login, userCode string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.answerDevice(login, userCode, deviceDenied)
}

func (f *Fake) answerDevice(login, userCode string, st deviceState) error {
	if login == "" {
		return ErrNotSignedIn
	}
	d := f.deviceByUserCode(userCode)
	if d == nil || d.state != devicePending || !f.now().Before(d.expires) {
		return ErrUnknownUserCode
	}
	d.state, d.login = st, login
	f.ensureUser(login, "User")
	return nil
}

// deviceVerify is the browser's page: POST user_code with authorize=1 or
// cancel=1, as the user SignInBrowser names.
func (f *Fake) deviceVerify(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><title>Device activation</title><h1>Device activation</h1><form method=post><input name=user_code><button name=authorize value=1>Continue</button></form>"))
		return
	}
	if r.Method != http.MethodPost {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	_ = r.ParseForm()
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := Request{Method: r.Method, Path: r.URL.Path, Op: "oauth device verify", Actor: f.browserUser}
	st := deviceAuthorized
	if r.Form.Get("cancel") != "" {
		st = deviceDenied
	}
	err := f.answerDevice(f.browserUser, r.Form.Get("user_code"), st)
	switch {
	case errors.Is(err, ErrNotSignedIn):
		rec.Status = http.StatusUnauthorized
	case err != nil:
		rec.Status = http.StatusUnprocessableEntity
	default:
		rec.Status = http.StatusOK
	}
	f.requests = append(f.requests, rec)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(rec.Status)
	if err != nil {
		_, _ = w.Write([]byte("<!doctype html><title>Device activation</title><p>" + err.Error()))
		return
	}
	_, _ = w.Write([]byte("<!doctype html><title>Device activation</title><p>Congratulations, you're all set!"))
}

// deviceAccessToken answers a device grant's token request; f.mu is held.
func (f *Fake) deviceAccessToken(w http.ResponseWriter, r *http.Request, rec *Request) {
	fail := func(code, desc string, extra ...any) {
		v := map[string]any{"error": code, "error_description": desc, "error_uri": "https://docs.github.com/developers/apps/authorizing-oauth-apps#error-codes-for-the-device-flow"}
		for i := 0; i+1 < len(extra); i += 2 {
			v[extra[i].(string)] = extra[i+1]
		}
		oauthReply(w, r, v)
	}
	c := f.oauthClients[r.Form.Get("client_id")]
	if c == nil {
		fail("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
		return
	}
	if !c.DeviceFlow {
		fail("device_flow_disabled", "Device Flow must be explicitly enabled for this App")
		return
	}
	if r.Form.Get("grant_type") != DeviceGrantType {
		fail("unsupported_grant_type", "The grant type must be "+DeviceGrantType)
		return
	}
	dc := r.Form.Get("device_code")
	d := f.devices[dc]
	if d == nil || d.client != c.ClientID {
		fail("incorrect_device_code", "The device_code provided is not valid.")
		return
	}
	now := f.now()
	if !now.Before(d.expires) {
		fail("expired_token", "The device_code has expired.")
		return
	}
	if d.state == deviceDenied {
		fail("access_denied", "The authorization request was denied.")
		return
	}
	early := !d.lastPoll.IsZero() && now.Sub(d.lastPoll) < d.interval
	d.lastPoll = now
	if early {
		d.interval += deviceSlowDownStep
		fail("slow_down", "Too many requests have been made in the same timeframe.", "interval", int(d.interval/time.Second))
		return
	}
	if d.state == devicePending {
		fail("authorization_pending", "The authorization request is still pending.")
		return
	}
	delete(f.devices, dc) // good once
	tok := "ghu_" + randomHex(18)
	f.tokens[tok] = &identity{user: f.ensureUser(d.login, "User"), expires: now.Add(UserTokenLifetime)}
	rec.Actor = d.login
	oauthReply(w, r, map[string]any{
		"access_token": tok, "expires_in": int(UserTokenLifetime / time.Second),
		"refresh_token": "ghr_" + randomHex(30), "refresh_token_expires_in": 15897600,
		"scope": "", "token_type": "bearer",
	})
}

// RevokeToken makes a token unusable, as a user revoking the app's
// authorization (or GitHub's secret scanning) does.
func (f *Fake) RevokeToken(tok string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tokens, tok)
}
