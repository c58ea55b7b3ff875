package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// deviceStandIn answers GET /v1/auth/device like agentos serve and the
// device flow's endpoints with the scripted token answers, one per poll
// (the last repeats); it records what it was sent. It tests the CLI's
// handling of each answer GitHub documents; the rules themselves are the
// fake GitHub's (TestOAuthDeviceFlow) and the whole flow runs against it
// in bot/e2e (TestLoginDeviceFlowReadsARun).
type deviceStandIn struct {
	mu      sync.Mutex
	codeErr string
	expires int // expires_in of the device code (900 default)
	polls   []map[string]any
	forms   []string
	srv     *httptest.Server
	runs    int // status of GET /v1/runs (200 default)
}

func newDeviceStandIn(t *testing.T, polls ...map[string]any) *deviceStandIn {
	d := &deviceStandIn{polls: polls}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = r.ParseForm()
		switch r.URL.Path {
		case "/v1/auth/device":
			json.NewEncoder(w).Encode(map[string]string{"client_id": "Iv1.x", "github_url": d.srv.URL, "api_url": d.srv.URL})
		case "/login/device/code":
			if d.codeErr != "" {
				json.NewEncoder(w).Encode(map[string]any{"error": d.codeErr})
				return
			}
			expires := 900
			if d.expires != 0 {
				expires = d.expires
			}
			// GitHub names 5 s; the stand-in 1 s, the shortest oauth2
			// can wait, so that these tests take seconds.
			json.NewEncoder(w).Encode(map[string]any{"device_code": "dc", "user_code": "ABCD-EFGH", "verification_uri": d.srv.URL + "/login/device", "expires_in": expires, "interval": 1})
		case "/login/oauth/access_token":
			d.forms = append(d.forms, r.Form.Encode())
			a := d.polls[0]
			if len(d.polls) > 1 {
				d.polls = d.polls[1:]
			}
			json.NewEncoder(w).Encode(a)
		case "/user":
			json.NewEncoder(w).Encode(map[string]string{"login": "rita", "type": "User"})
		case "/v1/runs":
			if d.runs != 0 {
				w.WriteHeader(d.runs)
			}
			w.Write([]byte(`{"runs":[]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// signInEnv keeps the credentials of a test in a directory of its own.
func signInEnv(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(envServer, "")
}

const standInToken = "ghu_standInToken0123456789abcdef0123"

// TestLoginDeviceFlowAnswers: each answer of GitHub's token endpoint
// leads to what GitHub documents: keep polling, wait longer, or stop with
// exit 6 and a message that says why. The cases run in parallel: oauth2
// waits on real timers (1 s, the stand-in's interval; 6 s after a
// slow_down).
func TestLoginDeviceFlowAnswers(t *testing.T) {
	signInEnv(t)
	pending := map[string]any{"error": "authorization_pending"}
	token := map[string]any{"access_token": standInToken, "token_type": "bearer", "expires_in": 28800}
	cases := []struct {
		name    string
		codeErr string
		expires int
		polls   []map[string]any
		exit    int
		msg     string
		nPolls  int // token requests made (0: not checked)
	}{
		{"pending then token", "", 0, []map[string]any{pending, token}, 0, "Signed in to", 2},
		{"slow_down then token", "", 0, []map[string]any{{"error": "slow_down", "interval": 6}, token}, 0, "Signed in to", 2},
		{"expired_token", "", 0, []map[string]any{pending, {"error": "expired_token"}}, exitAuth, "expired before it was entered", 2},
		{"access_denied", "", 0, []map[string]any{{"error": "access_denied"}}, exitAuth, "cancelled on GitHub", 1},
		{"incorrect_device_code", "", 0, []map[string]any{{"error": "incorrect_device_code"}}, exitAuth, "incorrect_device_code", 1},
		{"device_flow_disabled on poll", "", 0, []map[string]any{{"error": "device_flow_disabled"}}, exitAuth, "Enable Device Flow", 1},
		{"device_flow_disabled on code", "device_flow_disabled", 0, nil, exitAuth, "Enable Device Flow", 0},
		{"other error on code", "unverified_user_email", 0, nil, exitAuth, "unverified_user_email", 0},
		{"unknown error", "", 0, []map[string]any{{"error": "something_new", "error_description": "new"}}, exitAuth, "something_new", 1},
		// GitHub never answering within expires_in: the CLI stops itself.
		{"local deadline", "", 2, []map[string]any{pending}, exitAuth, "expired before it was entered", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := newDeviceStandIn(t, c.polls...)
			d.codeErr, d.expires = c.codeErr, c.expires
			var out, errb bytes.Buffer
			err := run(context.Background(), []string{"login", "--server", d.srv.URL}, &out, &errb)
			code := exitCode(err, &errb)
			if code != c.exit || !strings.Contains(out.String()+errb.String(), c.msg) {
				t.Fatalf("exit %d, want %d with %q\nstdout %s\nstderr %s", code, c.exit, c.msg, out.String(), errb.String())
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if c.nPolls != 0 && len(d.forms) != c.nPolls {
				t.Errorf("%d token requests, want %d", len(d.forms), c.nPolls)
			}
			if c.name == "local deadline" && len(d.forms) == 0 {
				t.Error("no poll before the code expired")
			}
			for _, f := range d.forms {
				if !strings.Contains(f, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code") || !strings.Contains(f, "device_code=dc") || !strings.Contains(f, "client_id=Iv1.x") || strings.Contains(f, "client_secret") {
					t.Errorf("token request %s", f)
				}
			}
			if strings.Contains(out.String()+errb.String(), standInToken) {
				t.Error("the token is printed")
			}
			if !strings.Contains(errb.String(), "ABCD-EFGH") && c.codeErr == "" {
				t.Errorf("the user code is not shown: %s", errb.String())
			}
		})
	}
}

// TestLoginStoresTheTokenPrivately: the token is kept 0600 in the user's
// configuration directory, per server, and used by runs; a credentials
// file others can read is refused; the server refusing the token or the
// token's stored expiry end in exit 6; plain http is for localhost only.
func TestLoginStoresTheTokenPrivately(t *testing.T) {
	signInEnv(t)
	d := newDeviceStandIn(t, map[string]any{"access_token": standInToken, "expires_in": 28800})
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"login", "--server", d.srv.URL}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	path, _ := credentialsPath()
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials %s: %v %v", path, st, err)
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Errorf("credentials directory mode %o", dst.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), standInToken) || strings.Contains(out.String(), standInToken) {
		t.Fatalf("stored %s; printed %s", b, out.String())
	}
	// runs finds the only server signed in to.
	out.Reset()
	if err := run(context.Background(), []string{"runs"}, &out, &errb); err != nil {
		t.Errorf("runs: %v", err)
	}
	// The server refusing the token: exit 6.
	d.runs = http.StatusUnauthorized
	if err := run(context.Background(), []string{"runs"}, &out, &errb); exitCode(err, &errb) != exitAuth || !strings.Contains(err.Error(), "agentos login") {
		t.Errorf("refused token: %v", err)
	}
	d.runs = 0
	// The stored expiry (eight hours) passed: exit 6 without asking the
	// server.
	later := time.Now().Add(9 * time.Hour)
	deviceNow = func() time.Time { return later }
	t.Cleanup(func() { deviceNow = time.Now })
	if err := run(context.Background(), []string{"runs"}, &out, &errb); exitCode(err, &errb) != exitAuth || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token: %v", err)
	}
	// A credentials file others may read is refused.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"runs"}, &out, &errb); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a 0644 credentials file: %v", err)
	}
	// http only on loopback.
	err = run(context.Background(), []string{"login", "--server", "http://agentos.example.com"}, &out, &errb)
	if ee := (*exitError)(nil); !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), "in clear") {
		t.Errorf("http server: %v", err)
	}
}

func TestTermSafe(t *testing.T) {
	got := termSafe("a\x1b[31mred\x07\nb\u202ec\xff"+strings.Repeat("x", 10), 16)
	if strings.ContainsAny(got, "\x1b\x07\n\u202e") || !strings.HasSuffix(got, "…") {
		t.Errorf("termSafe = %q", got)
	}
}
