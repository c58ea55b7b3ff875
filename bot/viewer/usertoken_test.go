package viewer

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/bot/internal/fakegithub"
)

// deviceToken runs GitHub's device flow against the fake for login and
// returns the user access token (eight hours on the fake's clock).
func (w *world) deviceToken(login string) string {
	w.t.Helper()
	w.fake.AddOAuthClient(fakegithub.OAuthClient{ClientID: "Iv1.viewer", ClientSecret: "shh", CallbackURL: w.srv.URL + "/login/callback", DeviceFlow: true})
	post := func(path string, form url.Values) map[string]any {
		req, _ := http.NewRequest(http.MethodPost, w.ghURL()+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			w.t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	d := post("/login/device/code", url.Values{"client_id": {"Iv1.viewer"}})
	uc, _ := d["user_code"].(string)
	if err := w.fake.EnterDeviceCode(login, uc); err != nil {
		w.t.Fatalf("device flow: %v (%v)", err, d)
	}
	tok := post("/login/oauth/access_token", url.Values{"client_id": {"Iv1.viewer"}, "device_code": {d["device_code"].(string)}, "grant_type": {fakegithub.DeviceGrantType}})
	at, _ := tok["access_token"].(string)
	if at == "" {
		w.t.Fatalf("device flow: %v", tok)
	}
	return at
}

// ghURL is the fake GitHub's web root, as GET /v1/auth/device names it.
func (w *world) ghURL() string {
	var di DeviceInfo
	r := w.get(http.DefaultClient, "/v1/auth/device", "")
	if r.status != http.StatusOK || json.Unmarshal([]byte(r.body), &di) != nil || di.ClientID != "Iv1.viewer" {
		w.t.Fatalf("GET /v1/auth/device: %d %s", r.status, r.body)
	}
	return di.GitHubURL
}

// TestUserTokenReads: a maintainer's GitHub user token (agentos login's)
// as the bearer token reads what the same user reads signed in: read
// permission to view, nothing for an outsider or the bot itself (404, no
// existence oracle), never a session outside GitHub; an expired or
// revoked token is a 401 that says so; GitHub down is a 503; a token
// cannot answer approvals (no CSRF token); GET /user is asked once per
// token per minute.
func TestUserTokenReads(t *testing.T) {
	w := newWorld(t)
	w.fake.SetClock(w.clock)
	c := http.DefaultClient
	const pad = "0123456789abcdef0123456789abcdef"
	w.fake.AddToken("ghu_rita"+pad, "rita")
	w.fake.AddToken("ghu_olga"+pad, "olga")
	w.fake.AddToken("ghu_bot0"+pad, botLogin)
	w.fake.AddToken("ghu_wes0"+pad, "wes")

	di := w.get(c, "/v1/auth/device", "")
	if di.status != http.StatusOK || !strings.Contains(di.body, `"client_id":"Iv1.viewer"`) || strings.Contains(di.body, "shh") {
		t.Fatalf("GET /v1/auth/device: %d %s", di.status, di.body)
	}

	for _, tc := range []struct {
		tok, path string
		want      int
	}{
		{"ghu_rita" + pad, "/v1/runs/gh-1", 200},
		{"ghu_rita" + pad, "/runs/gh-1", 200},
		{"ghu_rita" + pad, "/v1/runs/gh-secret", 404},
		{"ghu_rita" + pad, "/v1/runs/api-1", 404},
		{"ghu_rita" + pad, "/v1/runs/no-such", 404},
		{"ghu_olga" + pad, "/v1/runs/gh-1", 404},
		{"ghu_olga" + pad, "/runs/gh-1", 404},
		{"ghu_bot0" + pad, "/v1/runs/gh-1", 404},
		{"ghu_unknown" + pad, "/v1/runs/gh-1", 401},
		{"not-a-github-token", "/v1/runs/gh-1", 401},
	} {
		if r := w.get(c, tc.path, tc.tok); r.status != tc.want {
			t.Errorf("%s… GET %s: %d, want %d: %s", tc.tok[:8], tc.path, r.status, tc.want, r.body)
		}
	}
	// The listing holds exactly what the user may read.
	var list struct {
		Runs []struct {
			SessionID string `json:"session_id"`
		} `json:"runs"`
	}
	r := w.get(c, "/v1/runs", "ghu_rita"+pad)
	if err := json.Unmarshal([]byte(r.body), &list); err != nil || len(list.Runs) != 1 || list.Runs[0].SessionID != "gh-1" {
		t.Errorf("rita's listing: %d %s", r.status, r.body)
	}
	if r := w.get(c, "/v1/runs", "ghu_olga"+pad); r.status != 200 || !strings.Contains(r.body, `"runs":[]`) {
		t.Errorf("an outsider's listing: %d %s", r.status, r.body)
	}
	// One GET /user per token while it is remembered; none for a string
	// that is no GitHub token.
	if n := w.fake.CallsBy("rita")["GET /user"]; n != 1 {
		t.Errorf("GET /user as rita: %d calls, want 1", n)
	}
	// A token cannot post the viewer's forms (no CSRF token).
	req, _ := http.NewRequest(http.MethodPost, w.srv.URL+"/runs/gh-1/approvals/ap-1", strings.NewReader("decision=approve"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer ghu_wes0"+pad)
	if r := w.do(c, req); r.status != http.StatusForbidden || len(w.ans.list()) != 0 {
		t.Errorf("approve with a bearer token: %d, answers %v", r.status, w.ans.list())
	}

	// Revoked: still read while remembered (at most UserTokenTTL), then 401.
	w.fake.RevokeToken("ghu_rita" + pad)
	if r := w.get(c, "/v1/runs/gh-1", "ghu_rita"+pad); r.status != 200 {
		t.Errorf("revoked but remembered: %d", r.status)
	}
	w.mu.Lock()
	w.now = w.now.Add(time.Minute)
	w.mu.Unlock()
	r = w.get(c, "/v1/runs/gh-1", "ghu_rita"+pad)
	if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "token_rejected") || !strings.Contains(r.body, "agentos login") {
		t.Errorf("revoked token: %d %s", r.status, r.body)
	}

	// Expired: a device-flow token dies after eight hours.
	tok := w.deviceToken("rita")
	if r := w.get(c, "/v1/runs/gh-1", tok); r.status != 200 {
		t.Fatalf("device token: %d %s", r.status, r.body)
	}
	w.mu.Lock()
	w.now = w.now.Add(fakegithub.UserTokenLifetime)
	w.mu.Unlock()
	if r := w.get(c, "/v1/runs/gh-1", tok); r.status != http.StatusUnauthorized || !strings.Contains(r.body, "token_rejected") {
		t.Errorf("expired token: %d %s", r.status, r.body)
	}
	if strings.Contains(r.body, tok) {
		t.Error("the answer quotes the token")
	}
}

// TestUserTokenGitHubDown: GitHub unreachable or failing is a 503 to
// retry, not a refusal, and nothing is remembered.
func TestUserTokenGitHubDown(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unicorn", http.StatusBadGateway)
	}))
	defer down.Close()
	ck, err := access.New(access.Options{Token: opToken, Users: access.GitHubUsers{APIURL: down.URL}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/runs", nil)
	req.Header.Set("Authorization", "Bearer ghu_0123456789abcdef0123456789abcdef")
	if _, err := ck.Identify(req); err == nil || !strings.Contains(err.Error(), "HTTP 502") {
		t.Errorf("GitHub 502: %v", err)
	} else if !errors.Is(err, access.ErrGitHubUnavailable) {
		t.Errorf("GitHub 502 is not ErrGitHubUnavailable: %v", err)
	}
	down.Close()
	if _, err := ck.Identify(req); !errors.Is(err, access.ErrGitHubUnavailable) {
		t.Errorf("GitHub unreachable: %v", err)
	}
	// The operator's token never asks GitHub.
	req.Header.Set("Authorization", "Bearer "+opToken)
	if p, err := ck.Identify(req); err != nil || p.Kind != access.Operator {
		t.Errorf("operator: %+v %v", p, err)
	}
}
