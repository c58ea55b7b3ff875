package fakegithub

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestOAuthWebFlow(t *testing.T) {
	f := New(t)
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	f.SetClock(func() time.Time { return now })
	base := f.Serve(t)
	f.AddOAuthClient(OAuthClient{ClientID: "Iv1.c", ClientSecret: "s", CallbackURL: "https://viewer.example/login/callback"})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	authorize := func(q string) *http.Response {
		t.Helper()
		resp, err := noRedirect.Get(base + "/login/oauth/authorize?" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// Nobody signed in: GitHub shows its sign-in page, no code.
	if r := authorize("client_id=Iv1.c&state=x"); r.StatusCode != http.StatusOK {
		t.Errorf("authorize without a signed-in user: %d", r.StatusCode)
	}
	if r := authorize("client_id=nope"); r.StatusCode != http.StatusNotFound {
		t.Errorf("unknown client: %d", r.StatusCode)
	}
	f.SignInBrowser("mona")
	r := authorize("client_id=Iv1.c&state=st&redirect_uri=" + url.QueryEscape("https://evil.example/cb"))
	if loc, _ := url.Parse(r.Header.Get("Location")); loc.Host != "viewer.example" || loc.Query().Get("error") != "redirect_uri_mismatch" {
		t.Errorf("foreign redirect_uri: → %s", r.Header.Get("Location"))
	}
	r = authorize("client_id=Iv1.c&state=st&redirect_uri=" + url.QueryEscape("https://viewer.example/login/callback"))
	loc, _ := url.Parse(r.Header.Get("Location"))
	code := loc.Query().Get("code")
	if r.StatusCode != http.StatusFound || loc.Host != "viewer.example" || code == "" || loc.Query().Get("state") != "st" {
		t.Fatalf("authorize: %d → %s", r.StatusCode, loc)
	}
	exchange := func(secret, code string) map[string]any {
		t.Helper()
		form := url.Values{"client_id": {"Iv1.c"}, "client_secret": {secret}, "code": {code}, "redirect_uri": {"https://viewer.example/login/callback"}}
		req, _ := http.NewRequest(http.MethodPost, base+"/login/oauth/access_token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
			t.Fatalf("access_token: %d", resp.StatusCode)
		}
		return out
	}
	if got := exchange("wrong", code); got["error"] != "incorrect_client_credentials" {
		t.Errorf("wrong secret: %v", got)
	}
	tok := exchange("s", code)
	if at, _ := tok["access_token"].(string); !strings.HasPrefix(at, "ghu_") || tok["token_type"] != "bearer" || tok["expires_in"] != 28800.0 {
		t.Fatalf("token = %v", tok)
	}
	if got := exchange("s", code); got["error"] != "bad_verification_code" {
		t.Errorf("a code used twice: %v", got)
	}
	user := func() int {
		req, _ := http.NewRequest(http.MethodGet, base+"/user", nil)
		req.Header.Set("Authorization", "Bearer "+tok["access_token"].(string))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var u struct{ Login string }
		json.NewDecoder(resp.Body).Decode(&u)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && u.Login != "mona" {
			t.Errorf("GET /user = %s, want mona", u.Login)
		}
		return resp.StatusCode
	}
	if got := user(); got != http.StatusOK {
		t.Errorf("GET /user with the user token: %d", got)
	}
	now = now.Add(UserTokenLifetime)
	if got := user(); got != http.StatusUnauthorized {
		t.Errorf("GET /user with an expired user token: %d, want 401", got)
	}
	f.CheckNoViolations(t)
}
