package fakegithub

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestOAuthDeviceFlow: the device flow's rules as GitHub documents them:
// the app's setting, interval and slow_down (+5 s), pending, expiry, a
// cancelled authorization, one-time device and user codes, the grant
// type, and the token that GET /user accepts.
func TestOAuthDeviceFlow(t *testing.T) {
	f := New(t)
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	f.SetClock(func() time.Time { return now })
	base := f.Serve(t)
	f.AddOAuthClient(OAuthClient{ClientID: "Iv1.dev", ClientSecret: "s", DeviceFlow: true})
	f.AddOAuthClient(OAuthClient{ClientID: "Iv1.off", ClientSecret: "s"})
	post := func(path string, form url.Values) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	start := func(client string) map[string]any {
		t.Helper()
		st, out := post("/login/device/code", url.Values{"client_id": {client}})
		if st != http.StatusOK {
			t.Fatalf("device code: %d %v", st, out)
		}
		return out
	}
	poll := func(client, dc string) map[string]any {
		t.Helper()
		_, out := post("/login/oauth/access_token", url.Values{"client_id": {client}, "device_code": {dc}, "grant_type": {DeviceGrantType}})
		return out
	}
	errOf := func(m map[string]any) string { s, _ := m["error"].(string); return s }

	if st, _ := post("/login/device/code", url.Values{"client_id": {"nope"}}); st != http.StatusNotFound {
		t.Errorf("unknown client: %d, want 404", st)
	}
	if got := start("Iv1.off"); errOf(got) != "device_flow_disabled" {
		t.Errorf("device flow off: %v", got)
	}
	d := start("Iv1.dev")
	dc, uc := d["device_code"].(string), d["user_code"].(string)
	if len(dc) != 40 || len(uc) != 9 || uc[4] != '-' || d["verification_uri"] != base+"/login/device" || d["expires_in"] != 900.0 || d["interval"] != 5.0 {
		t.Fatalf("device code response %v", d)
	}
	if got := poll("Iv1.dev", dc); errOf(got) != "authorization_pending" {
		t.Errorf("first poll: %v", got)
	}
	now = now.Add(2 * time.Second) // sooner than the interval
	if got := poll("Iv1.dev", dc); errOf(got) != "slow_down" || got["interval"] != 10.0 {
		t.Errorf("early poll: %v, want slow_down with interval 10", got)
	}
	now = now.Add(6 * time.Second) // the old interval, not the new one
	if got := poll("Iv1.dev", dc); errOf(got) != "slow_down" || got["interval"] != 15.0 {
		t.Errorf("poll after 6 s with interval 10: %v", got)
	}
	now = now.Add(15 * time.Second)
	if got := poll("Iv1.dev", dc); errOf(got) != "authorization_pending" {
		t.Errorf("poll after the interval: %v", got)
	}
	if got := poll("Iv1.off", dc); errOf(got) != "device_flow_disabled" {
		t.Errorf("poll as an app without device flow: %v", got)
	}
	if got := poll("nope", dc); errOf(got) != "incorrect_client_credentials" {
		t.Errorf("poll with an unknown client: %v", got)
	}
	if _, got := post("/login/oauth/access_token", url.Values{"client_id": {"Iv1.dev"}, "device_code": {dc}, "grant_type": {"authorization_code"}}); errOf(got) != "unsupported_grant_type" {
		t.Errorf("wrong grant type: %v", got)
	}
	if got := poll("Iv1.dev", "0000"); errOf(got) != "incorrect_device_code" {
		t.Errorf("unknown device code: %v", got)
	}
	if err := f.EnterDeviceCode("", uc); err != ErrNotSignedIn {
		t.Errorf("nobody signed in: %v", err)
	}
	if err := f.EnterDeviceCode("mona", "ZZZZ-ZZZZ"); err != ErrUnknownUserCode {
		t.Errorf("wrong user code: %v", err)
	}
	if err := f.EnterDeviceCode("mona", strings.ToLower(uc)); err != nil {
		t.Fatal(err)
	}
	if err := f.EnterDeviceCode("hubot", uc); err != ErrUnknownUserCode {
		t.Errorf("a user code entered twice: %v", err)
	}
	now = now.Add(20 * time.Second)
	tok := poll("Iv1.dev", dc)
	at, _ := tok["access_token"].(string)
	if !strings.HasPrefix(at, "ghu_") || tok["token_type"] != "bearer" || tok["expires_in"] != 28800.0 {
		t.Fatalf("token %v", tok)
	}
	now = now.Add(20 * time.Second)
	if got := poll("Iv1.dev", dc); errOf(got) != "incorrect_device_code" {
		t.Errorf("a device code used twice: %v", got)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/user", nil)
	req.Header.Set("Authorization", "Bearer "+at)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var u struct{ Login string }
	_ = json.NewDecoder(resp.Body).Decode(&u)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || u.Login != "mona" {
		t.Errorf("GET /user with the device token: %d %s", resp.StatusCode, u.Login)
	}

	// Cancelled: access_denied, for good, and the user code is spent.
	d = start("Iv1.dev")
	dc, uc = d["device_code"].(string), d["user_code"].(string)
	f.SignInBrowser("mona")
	st, _ := post("/login/device", url.Values{"user_code": {uc}, "cancel": {"1"}})
	if st != http.StatusOK {
		t.Fatalf("cancel from the browser: %d", st)
	}
	for i := 0; i < 2; i++ {
		now = now.Add(time.Minute)
		if got := poll("Iv1.dev", dc); errOf(got) != "access_denied" {
			t.Errorf("poll %d after cancel: %v", i, got)
		}
	}
	if st, _ := post("/login/device", url.Values{"user_code": {uc}, "authorize": {"1"}}); st != http.StatusUnprocessableEntity {
		t.Errorf("a cancelled user code entered again: %d", st)
	}

	// Expired: after 15 minutes, expired_token; the user code is dead.
	d = start("Iv1.dev")
	dc, uc = d["device_code"].(string), d["user_code"].(string)
	now = now.Add(DeviceCodeLifetime)
	if got := poll("Iv1.dev", dc); errOf(got) != "expired_token" {
		t.Errorf("poll after expiry: %v", got)
	}
	if err := f.EnterDeviceCode("mona", uc); err != ErrUnknownUserCode {
		t.Errorf("an expired user code entered: %v", err)
	}
	// The browser page authorizes as the signed-in user.
	d = start("Iv1.dev")
	if st, _ := post("/login/device", url.Values{"user_code": {d["user_code"].(string)}, "authorize": {"1"}}); st != http.StatusOK {
		t.Errorf("authorize from the browser: %d", st)
	}
	now = now.Add(time.Minute)
	if got := poll("Iv1.dev", d["device_code"].(string)); got["access_token"] == nil {
		t.Errorf("token after the browser authorized: %v", got)
	}
	f.CheckNoViolations(t)
}
