package viewer

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/bot/api"
	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
	"github.com/gin-gonic/gin"
)

const (
	opToken  = "operator-token-0123456789"
	botLogin = "agentos-bot"
	digest   = "abababababababababababababababababababababababababababababababab"
)

type answers struct {
	mu  sync.Mutex
	got []Answer
}

func (a *answers) Answer(_ context.Context, x Answer) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, x)
	return nil
}

func (a *answers) list() []Answer {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Answer(nil), a.got...)
}

type world struct {
	t      *testing.T
	fake   *fakegithub.Fake
	srv    *httptest.Server
	store  store.Store
	access *access.Checker
	now    time.Time
	clock  func() time.Time
	ans    *answers
	mu     sync.Mutex
}

func newSealer(t testing.TB) *event.Sealer {
	s, err := event.NewSealer(schemas.MustDefault(), redact.New(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func appendTo(t testing.TB, s store.Store, sid string, ds ...event.Draft) {
	t.Helper()
	evs, err := s.Read(context.Background(), sid, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), sid, int64(len(evs)), ds...); err != nil {
		t.Fatal(err)
	}
}

// githubSession appends a session started from GitHub on repo that waits
// for approval ap-1 on prompt.
func githubSession(t testing.TB, s store.Store, sid, repo, prompt string) {
	run := "run-" + sid
	appendTo(t, s, sid,
		event.Draft{RunID: run, Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": prompt}},
		event.Draft{RunID: run, Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": run, "prompt": prompt, "trigger": map[string]any{"repo": repo, "number": 7}}},
		event.Draft{RunID: run, Type: event.ApprovalRequested, Actor: "kernel", Payload: map[string]any{"approval_id": "ap-1", "tool": "repo.patch", "digest": digest, "preview": map[string]any{"diff": "--- a/x.go\n+++ b/x.go\n@@ -1 +1 @@\n-old\n+new <script>alert(1)</script>\n"}}},
		event.Draft{RunID: run, Type: event.RunPaused, Actor: "runtime", Payload: map[string]any{"reason": "approval", "approval_ids": []string{"ap-1"}}},
	)
}

func newWorld(t *testing.T) *world {
	t.Helper()
	// The clock starts at the wall clock's time: the client's cookie jar
	// drops a cookie whose Expires is past by its own (real) clock, so a
	// fixed date here made sign-in fail once the calendar passed it.
	w := &world{t: t, fake: fakegithub.New(t), now: time.Now().UTC().Truncate(time.Second), ans: &answers{}}
	w.clock = func() time.Time { w.mu.Lock(); defer w.mu.Unlock(); return w.now }
	f := w.fake
	f.AddRepo(fakegithub.Repo{Owner: "octo", Name: "app", Private: true})
	f.AddRepo(fakegithub.Repo{Owner: "octo", Name: "secret", Private: true})
	f.AddToken("bot-token", botLogin)
	f.SetPermission("octo/app", botLogin, fakegithub.PermWrite)
	f.SetPermission("octo/secret", botLogin, fakegithub.PermWrite)
	f.SetPermission("octo/app", "rita", fakegithub.PermRead)
	f.SetPermission("octo/app", "wes", fakegithub.PermWrite)
	f.AddUser("olga", "User") // an outsider
	ghURL := f.Serve(t)
	gh, err := github.New(github.Config{BaseURL: ghURL, Token: "bot-token"})
	if err != nil {
		t.Fatal(err)
	}
	w.access, err = access.New(access.Options{Token: opToken, Secret: []byte(strings.Repeat("k", 32)), Authorizer: auth.New(gh, auth.Policy{BotLogin: botLogin, TTL: -1}), Now: w.clock,
		Users: access.GitHubUsers{APIURL: ghURL}})
	if err != nil {
		t.Fatal(err)
	}
	w.store = store.NewMemory(newSealer(t))
	githubSession(t, w.store, "gh-1", "octo/app", "fix <script>alert('x')</script> [a](javascript:alert(1))")
	githubSession(t, w.store, "gh-secret", "octo/secret", "secret work")
	appendTo(t, w.store, "api-1", event.Draft{RunID: "r", Type: event.SessionStart, Actor: "user", Payload: map[string]any{"prompt": "local"}},
		event.Draft{RunID: "r", Type: event.RunStarted, Actor: "runtime", Payload: map[string]any{"run_id": "r", "prompt": "local", "trigger": map[string]any{"source": "api", "repo_dir": "/srv/x"}}})

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := api.New(api.Options{Store: w.store, Token: opToken, Access: w.access, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	a.Register(e)
	w.srv = httptest.NewServer(e)
	t.Cleanup(w.srv.Close)
	t.Cleanup(a.EndStreams)
	f.AddOAuthClient(fakegithub.OAuthClient{ClientID: "Iv1.viewer", ClientSecret: "shh", CallbackURL: w.srv.URL + "/login/callback"})
	v, err := New(Options{Store: w.store, Access: w.access, Lister: a, Answerer: w.ans, Logger: quiet, Now: w.clock,
		OAuth: &OAuth{ClientID: "Iv1.viewer", ClientSecret: "shh", WebURL: ghURL, APIURL: ghURL, CallbackURL: w.srv.URL + "/login/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	v.Register(e)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); v.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// browser signs login in through the OAuth web flow and returns a client
// holding the session cookie ("" returns a client with no cookie).
func (w *world) browser(login string) *http.Client {
	w.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	if login == "" {
		return c
	}
	w.fake.SignInBrowser(login)
	resp, err := c.Get(w.srv.URL + "/login?next=/runs/gh-1")
	if err != nil {
		w.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Request.URL.Path != "/runs/gh-1" || !strings.Contains(string(b), "signed in as") {
		w.t.Fatalf("sign-in of %s ended at %s with %d: %s", login, resp.Request.URL, resp.StatusCode, b)
	}
	u, _ := url.Parse(w.srv.URL)
	for _, ck := range jar.Cookies(u) {
		if ck.Name == access.CookieName {
			return c
		}
	}
	w.t.Fatalf("sign-in of %s set no session cookie", login)
	return nil
}

type result struct {
	status int
	body   string
	header http.Header
}

func (w *world) get(c *http.Client, path, bearer string) result {
	w.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, w.srv.URL+path, nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return w.do(c, req)
}

func (w *world) do(c *http.Client, req *http.Request) result {
	w.t.Helper()
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := cc.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return result{resp.StatusCode, "", resp.Header} // a paused run's stream stays open
	}
	b, _ := io.ReadAll(resp.Body)
	return result{resp.StatusCode, string(b), resp.Header}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestRolesReadingASession(t *testing.T) {
	w := newWorld(t)
	reads := []string{"/runs/gh-1", "/v1/runs/gh-1", "/v1/runs/gh-1/events?after=4", "/runs/gh-1/parts"}
	cases := []struct {
		name   string
		client *http.Client
		bearer string
		want   int
	}{
		{"anonymous", w.browser(""), "", http.StatusNotFound},
		{"outsider", w.browser("olga"), "", http.StatusNotFound},
		{"read permission", w.browser("rita"), "", http.StatusOK},
		{"write permission", w.browser("wes"), "", http.StatusOK},
		{"operator token", w.browser(""), opToken, http.StatusOK},
	}
	for _, tc := range cases {
		for _, path := range reads {
			r := w.get(tc.client, path, tc.bearer)
			want := tc.want
			if r.status != want {
				t.Errorf("%s: GET %s = %d, want %d: %.200s", tc.name, path, r.status, want, r.body)
			}
		}
	}
	// A session from a repository the reader cannot read, and one started
	// outside GitHub: 404, exactly like a session that does not exist.
	rita := w.browser("rita")
	for _, path := range []string{"/runs/gh-secret", "/v1/runs/gh-secret", "/runs/api-1", "/v1/runs/api-1", "/runs/nope", "/v1/runs/nope"} {
		if r := w.get(rita, path, ""); r.status != http.StatusNotFound {
			t.Errorf("rita: GET %s = %d, want 404", path, r.status)
		}
	}
	// Pages carry the strict CSP; the script and the style sheet come
	// from the binary.
	page := w.get(rita, "/runs/gh-1", "")
	if got := page.header.Get("Content-Security-Policy"); got != CSP || !strings.Contains(got, "script-src 'self'") || strings.Contains(got, "unsafe-inline") {
		t.Errorf("CSP = %q", got)
	}
	for path, typ := range map[string]string{"/assets/viewer.js": "javascript", "/assets/viewer.css": "text/css"} {
		if r := w.get(w.browser(""), path, ""); r.status != http.StatusOK || !strings.Contains(r.header.Get("Content-Type"), typ) {
			t.Errorf("GET %s: %d %s", path, r.status, r.header.Get("Content-Type"))
		}
	}
	if r := w.get(w.browser(""), "/v1/runs/api-1", opToken); r.status != http.StatusOK {
		t.Errorf("operator: GET /v1/runs/api-1 = %d, want 200", r.status)
	}
	// The listing shows only what the caller may read.
	r := w.get(rita, "/v1/runs", "")
	if r.status != http.StatusOK || !strings.Contains(r.body, `"gh-1"`) || strings.Contains(r.body, "gh-secret") || strings.Contains(r.body, "api-1") {
		t.Errorf("rita's GET /v1/runs = %d %s, want gh-1 only", r.status, r.body)
	}
	r = w.get(w.browser(""), "/v1/runs", opToken)
	for _, sid := range []string{"gh-1", "gh-secret", "api-1"} {
		if !strings.Contains(r.body, `"`+sid+`"`) {
			t.Errorf("operator's GET /v1/runs lacks %s: %s", sid, r.body)
		}
	}
	if r := w.get(w.browser("olga"), "/v1/runs", ""); !strings.Contains(r.body, `"runs":[]`) {
		t.Errorf("outsider's GET /v1/runs = %s, want no runs", r.body)
	}
}

func TestCredentialsInTheQueryStringAreRefused(t *testing.T) {
	w := newWorld(t)
	c := w.browser("")
	for _, path := range []string{"/v1/runs/gh-1?access_token=" + opToken, "/v1/runs/gh-1/events?token=" + opToken, "/v1/runs?after=" + opToken, "/runs/gh-1?access_token=x"} {
		r := w.get(c, path, "")
		if r.status != http.StatusBadRequest || strings.Contains(r.body, `"gh-1"`) {
			t.Errorf("GET %s = %d, want 400 refusing the token: %.200s", path, r.status, r.body)
		}
	}
	if r := w.get(c, "/v1/runs/gh-1", "wrong-token"); r.status != http.StatusUnauthorized {
		t.Errorf("wrong bearer token: %d, want 401", r.status)
	}
}

func TestCookies(t *testing.T) {
	w := newWorld(t)
	wes := w.browser("wes")
	u, _ := url.Parse(w.srv.URL)
	var sess *http.Cookie
	for _, ck := range wes.Jar.Cookies(u) {
		if ck.Name == access.CookieName {
			sess = ck
		}
	}
	// The Set-Cookie attributes: HttpOnly, SameSite=Lax, expiring.
	ck, err := w.access.IssueCookie("wes")
	if err != nil {
		t.Fatal(err)
	}
	if !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Expires.IsZero() || ck.Secure {
		t.Errorf("cookie = %+v, want HttpOnly, SameSite=Lax, an expiry, not Secure without TLS", ck)
	}
	secure, _ := access.New(access.Options{Secure: true})
	if ck, _ := secure.IssueCookie("wes"); !ck.Secure {
		t.Error("behind TLS the cookie must be Secure")
	}
	with := func(value string) int {
		req, _ := http.NewRequest(http.MethodGet, w.srv.URL+"/v1/runs/gh-1", nil)
		req.AddCookie(&http.Cookie{Name: access.CookieName, Value: value})
		return w.do(&http.Client{}, req).status
	}
	if got := with(sess.Value); got != http.StatusOK {
		t.Fatalf("wes's own cookie: %d, want 200", got)
	}
	// Forged: another login with wes's signature; a cookie signed with
	// another key; garbage.
	payload, sig, _ := strings.Cut(sess.Value, ".")
	forged := strings.Replace(payload, payload[:4], "eyJs", 1) + "." + sig
	other, _ := access.New(access.Options{Secret: []byte(strings.Repeat("z", 32)), Now: w.clock})
	ok2, _ := other.IssueCookie("wes")
	for name, v := range map[string]string{"tampered payload": forged + "x", "other key": ok2.Value, "garbage": "abc", "no signature": payload} {
		if got := with(v); got != http.StatusNotFound {
			t.Errorf("%s cookie: %d, want 404", name, got)
		}
	}
	// The bot's own login, even with a valid signature, reads nothing.
	bot, _ := w.access.IssueCookie(botLogin)
	if got := with(bot.Value); got != http.StatusNotFound {
		t.Errorf("the bot's own cookie: %d, want 404", got)
	}
	// Expired: eight hours later the same cookie is refused.
	w.mu.Lock()
	w.now = w.now.Add(8*time.Hour + time.Second)
	w.mu.Unlock()
	if got := with(sess.Value); got != http.StatusNotFound {
		t.Errorf("expired cookie: %d, want 404", got)
	}
}

func TestApproveFromThePage(t *testing.T) {
	w := newWorld(t)
	rita, wes := w.browser("rita"), w.browser("wes")
	page := w.get(rita, "/runs/gh-1", "")
	if strings.Contains(page.body, `value="approve"`) {
		t.Error("a reader sees the Approve button")
	}
	page = w.get(wes, "/runs/gh-1", "")
	if !strings.Contains(page.body, `value="approve"`) || !strings.Contains(page.body, "ap-1") {
		t.Fatalf("a writer does not see the Approve button:\n%s", page.body)
	}
	m := csrfRE.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatal("no CSRF token on the page")
	}
	post := func(c *http.Client, form url.Values) result {
		req, _ := http.NewRequest(http.MethodPost, w.srv.URL+"/runs/gh-1/approvals/ap-1", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return w.do(c, req)
	}
	good := url.Values{"csrf": {m[1]}, "decision": {"approve"}, "digest": {digest}, "head": {""}}
	// No or a wrong CSRF token: refused, nothing recorded.
	for _, bad := range []string{"", "x" + m[1]} {
		f := url.Values{"csrf": {bad}, "decision": {"approve"}, "digest": {digest}}
		if r := post(wes, f); r.status != http.StatusForbidden {
			t.Errorf("csrf %q: %d, want 403", bad, r.status)
		}
	}
	// A reader's token does not let a reader approve.
	rm := csrfRE.FindStringSubmatch(w.get(rita, "/runs/gh-1", "").body)
	if rm != nil {
		if r := post(rita, url.Values{"csrf": {rm[1]}, "decision": {"approve"}, "digest": {digest}}); r.status != http.StatusForbidden {
			t.Errorf("reader approving: %d, want 403", r.status)
		}
	}
	// A digest other than the page showed: stale.
	stale := url.Values{"csrf": {m[1]}, "decision": {"approve"}, "digest": {strings.Repeat("cd", 32)}}
	if r := post(wes, stale); r.status != http.StatusConflict {
		t.Errorf("stale digest: %d, want 409", r.status)
	}
	if got := w.ans.list(); len(got) != 0 {
		t.Fatalf("refused answers were recorded: %+v", got)
	}
	r := post(wes, good)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/runs/gh-1" {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(w.ans.list()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	got := w.ans.list()
	if len(got) != 1 || got[0] != (Answer{SessionID: "gh-1", ApprovalID: "ap-1", Decision: "approve", By: "wes", Reason: "via viewer"}) {
		t.Errorf("answers = %+v", got)
	}
}

func TestSignInFailures(t *testing.T) {
	w := newWorld(t)
	c := w.browser("")
	// A callback nobody started (no state cookie), and one with a state
	// that does not match the browser's.
	if r := w.get(c, "/login/callback?code=x&state=y", ""); r.status != http.StatusBadRequest {
		t.Errorf("callback without a started sign-in: %d, want 400", r.status)
	}
	r := w.get(c, "/login?next=//evil.example/x", "")
	loc, _ := url.Parse(r.header.Get("Location"))
	if r.status != http.StatusFound || loc.Path != "/login/oauth/authorize" || loc.Query().Get("client_id") != "Iv1.viewer" {
		t.Fatalf("login: %d → %s", r.status, loc)
	}
	if rr := w.get(c, "/login/callback?code=x&state=not-"+loc.Query().Get("state"), ""); rr.status != http.StatusBadRequest {
		t.Errorf("callback with another state: %d, want 400", rr.status)
	}
	// A code GitHub never issued.
	r = w.get(c, "/login", "")
	loc, _ = url.Parse(r.header.Get("Location"))
	if rr := w.get(c, "/login/callback?code=bogus&state="+loc.Query().Get("state"), ""); rr.status != http.StatusUnauthorized || !strings.Contains(rr.body, "bad_verification_code") {
		t.Errorf("bogus code: %d %.300s", rr.status, rr.body)
	}
	// The open redirect: after sign-in, //evil.example is not followed.
	w.fake.SignInBrowser("rita")
	resp, err := c.Get(w.srv.URL + "/login?next=//evil.example/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Host != strings.TrimPrefix(w.srv.URL, "http://") || resp.Request.URL.Path != "/runs" {
		t.Errorf("sign-in with next=//evil.example ended at %s", resp.Request.URL)
	}
}
