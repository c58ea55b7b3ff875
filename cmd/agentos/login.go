package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// agentos login signs a maintainer in to an agentos server from a
// terminal with GitHub's device flow for the server's GitHub App:
//
//  1. GET SERVER/v1/auth/device names the app's client ID and GitHub's
//     web and API roots (the server knows them; the CLI needs only the
//     server's URL);
//  2. POST GITHUB/login/device/code gives a user code, which the user
//     enters at GitHub's verification page;
//  3. POST GITHUB/login/oauth/access_token is polled no faster than the
//     interval GitHub asks (5 s more after each slow_down) until the user
//     authorizes, cancels, or the code expires;
//  4. the user access token is stored for that server in
//     os.UserConfigDir()/agentos/credentials.json (mode 0600, never
//     printed, never logged) and sent as the bearer token of agentos runs
//     and agentos view --server. The server asks GitHub whose it is and
//     applies the collaborator-permission check (read to view).

// exitAuth: not signed in to the server, or the server or GitHub refused
// the sign-in or the stored token.
const exitAuth = 6

func authErrorf(format string, args ...any) error {
	return &exitError{code: exitAuth, err: fmt.Errorf(format, args...)}
}

// envServer names the default server of login, runs and view --server.
const envServer = "AGENTOS_SERVER"

func loginFlags(fs *flag.FlagSet) *string {
	return fs.String("server", "", "the agentos server's URL (default $"+envServer+")")
}

// deviceNow is the clock that stored tokens expire by.
var deviceNow = time.Now

// cliHTTP is the CLI's HTTP client.
var cliHTTP = &http.Client{Timeout: 30 * time.Second}

func cmdLogin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("login", flag.ContinueOnError)
	server := loginFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageErrorf("usage: agentos login --server URL")
	}
	base, err := serverURL(*server)
	if err != nil {
		return err
	}
	var info struct {
		ClientID  string `json:"client_id"`
		GitHubURL string `json:"github_url"`
		APIURL    string `json:"api_url"`
	}
	status, err := getJSON(ctx, base+"/v1/auth/device", "", &info)
	switch {
	case err != nil:
		return fmt.Errorf("login: %s: %w", base, err)
	case status == http.StatusNotFound:
		return authErrorf("login: %s does not offer sign-in with GitHub (its operator has not set AGENTOS_GITHUB_CLIENT_ID)", base)
	case status != http.StatusOK || info.ClientID == "" || info.GitHubURL == "" || info.APIURL == "":
		return fmt.Errorf("login: GET %s/v1/auth/device answered %d without the app's client ID", base, status)
	}
	for _, u := range []string{info.GitHubURL, info.APIURL} {
		if _, err := serverURL(u); err != nil {
			return fmt.Errorf("login: the server names GitHub at %q: %v", u, err)
		}
	}
	tok, err := deviceFlow(ctx, info.ClientID, strings.TrimRight(info.GitHubURL, "/"), stderr)
	if err != nil {
		return err
	}
	login, err := githubLogin(ctx, info.APIURL, tok.AccessToken)
	if err != nil {
		return err
	}
	// The server must take the token before it is kept.
	var probe json.RawMessage
	status, err = getJSON(ctx, base+"/v1/runs?limit=1", tok.AccessToken, &probe)
	if err != nil {
		return fmt.Errorf("login: %s: %w", base, err)
	}
	if status != http.StatusOK {
		return authErrorf("login: %s refused the GitHub token of %s (HTTP %d)", base, login, status)
	}
	cred := serverCred{Token: tok.AccessToken, Login: login, GitHubURL: info.GitHubURL}
	if !tok.Expiry.IsZero() {
		cred.ExpiresAt = tok.Expiry.UTC().Format(time.RFC3339)
	}
	path, err := saveCredential(base, cred)
	if err != nil {
		return fmt.Errorf("login: %w", err)
	}
	fmt.Fprintf(stdout, "Signed in to %s as %s.\n", base, login)
	if cred.ExpiresAt != "" {
		fmt.Fprintf(stdout, "The token expires at %s; then run agentos login again.\n", cred.ExpiresAt)
	}
	fmt.Fprintf(stdout, "Stored in %s (mode 0600).\n", path)
	return nil
}

// serverURL checks a server's (or GitHub's) base URL: http only on the
// loopback interface, so that a token never crosses a network in clear.
func serverURL(raw string) (string, error) {
	if raw == "" {
		raw = os.Getenv(envServer)
	}
	if raw == "" {
		return "", usageErrorf("no server: pass --server URL or set %s", envServer)
	}
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", usageErrorf("--server %q: want a base URL such as https://agentos.example.com", raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return "", usageErrorf("--server %s: http sends the token in clear; use https (http is for localhost only)", raw)
		}
	default:
		return "", usageErrorf("--server %q: want an https:// URL", raw)
	}
	return u.String(), nil
}

// deviceFlow runs GitHub's device flow with golang.org/x/oauth2 and
// returns the user's token. oauth2 polls no faster than the interval
// GitHub names (5 s more after each slow_down) and stops when the code
// expires (15 minutes when GitHub does not say).
func deviceFlow(ctx context.Context, clientID, githubURL string, stderr io.Writer) (*oauth2.Token, error) {
	conf := &oauth2.Config{
		ClientID: clientID,
		Endpoint: oauth2.Endpoint{
			DeviceAuthURL: githubURL + "/login/device/code",
			TokenURL:      githubURL + "/login/oauth/access_token",
			// A public client: the client ID in the form, no secret.
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: cliHTTP.Timeout, Transport: oauthErrors{cliHTTP.Transport}})
	da, err := conf.DeviceAuth(ctx)
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re) && re.ErrorCode == "device_flow_disabled":
		return nil, authErrorf("login: the server's GitHub App does not allow the device flow: its owner must turn on \"Enable Device Flow\" in the app's settings")
	case errors.As(err, &re) && re.ErrorCode != "":
		return nil, authErrorf("login: GitHub refused a device code: %s %s", re.ErrorCode, re.ErrorDescription)
	case errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusNotFound:
		return nil, authErrorf("login: GitHub does not know the server's client ID %q", clientID)
	case errors.As(err, &re) && re.Response != nil:
		return nil, fmt.Errorf("login: POST %s/login/device/code answered %d without a code", githubURL, re.Response.StatusCode)
	case err != nil:
		return nil, fmt.Errorf("login: GitHub: %w", err)
	case da.DeviceCode == "" || da.UserCode == "":
		return nil, fmt.Errorf("login: POST %s/login/device/code answered without a code", githubURL)
	}
	if da.Expiry.IsZero() {
		da.Expiry = time.Now().Add(15 * time.Minute)
	}
	fmt.Fprintf(stderr, "First copy your one-time code: %s\nThen open %s in a browser and enter it.\nWaiting for GitHub (the code expires in %s)...\n",
		termSafe(da.UserCode, 64), termSafe(da.VerificationURI, 256), time.Until(da.Expiry).Round(time.Second))
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err == nil && tok.AccessToken == "" {
		err = errors.New("an answer without a token")
	}
	expired := authErrorf("login: the code %s expired before it was entered; run agentos login again", termSafe(da.UserCode, 64))
	re = nil
	switch {
	case err == nil:
		return tok, nil
	case ctx.Err() != nil:
		// The user stopped agentos (Ctrl-C).
		return nil, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		// GitHub never answered within expires_in: oauth2 stops itself.
		return nil, expired
	case !errors.As(err, &re):
		return nil, fmt.Errorf("login: GitHub: %w", err)
	}
	switch re.ErrorCode {
	case "expired_token":
		return nil, expired
	case "access_denied":
		return nil, authErrorf("login: the authorization was cancelled on GitHub")
	case "device_flow_disabled":
		return nil, authErrorf("login: the server's GitHub App does not allow the device flow: its owner must turn on \"Enable Device Flow\" in the app's settings")
	case "incorrect_device_code", "incorrect_client_credentials", "unsupported_grant_type":
		return nil, authErrorf("login: GitHub refused the device code: %s", re.ErrorCode)
	case "":
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return nil, fmt.Errorf("login: GitHub answered %d without a token", status)
	}
	return nil, authErrorf("login: GitHub: %s %s", re.ErrorCode, re.ErrorDescription)
}

// oauthErrors makes GitHub's OAuth errors look like OAuth errors to
// oauth2: GitHub answers them with 200 and an "error" field, which oauth2
// reads as an error at the token endpoint but takes for an empty answer at
// the device-code endpoint (losing device_flow_disabled). A 2xx JSON body
// with a non-empty "error" becomes a 400 with the same body.
type oauthErrors struct{ next http.RoundTripper }

func (t oauthErrors) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil || resp.StatusCode/100 != 2 || !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		return resp, err
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		resp.StatusCode, resp.Status = http.StatusBadRequest, "400 Bad Request"
	}
	return resp, nil
}

// githubLogin asks GitHub whose token it is.
func githubLogin(ctx context.Context, apiURL, token string) (string, error) {
	var u struct {
		Login string `json:"login"`
	}
	status, err := getJSON(ctx, strings.TrimRight(apiURL, "/")+"/user", token, &u)
	if err != nil {
		return "", fmt.Errorf("login: GitHub: %w", err)
	}
	if status != http.StatusOK || u.Login == "" {
		return "", authErrorf("login: GitHub does not accept the new token (GET /user: %d)", status)
	}
	return u.Login, nil
}

// getJSON GETs u with the bearer token (none if ""), decoding a 2xx body
// into out.
func getJSON(ctx context.Context, u, token string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return doJSON(req, out)
}

func doJSON(req *http.Request, out any) (int, error) {
	resp, err := cliHTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode/100 != 2 {
		_ = json.Unmarshal(b, out) // an error body, if it is one
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: not JSON: %v", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, nil
}

// Stored credentials.

type credentials struct {
	Servers map[string]serverCred `json:"servers"`
}

type serverCred struct {
	Token     string `json:"token"`
	Login     string `json:"login"`
	GitHubURL string `json:"github_url"`
	ExpiresAt string `json:"expires_at,omitempty"`
}

func credentialsPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no configuration directory for the credentials: %w", err)
	}
	return filepath.Join(dir, "agentos", "credentials.json"), nil
}

// loadCredentials reads the credentials file ({} when there is none). A
// file others may read is refused, as ssh refuses a key.
func loadCredentials() (credentials, string, error) {
	path, err := credentialsPath()
	if err != nil {
		return credentials{}, "", err
	}
	c := credentials{Servers: map[string]serverCred{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, path, nil
	}
	if err != nil {
		return c, path, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return c, path, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return c, path, fmt.Errorf("%s is readable by others (mode %o): chmod 600 it, or delete it and run agentos login", path, st.Mode().Perm())
	}
	if err := json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&c); err != nil {
		return c, path, fmt.Errorf("%s: %v (delete it and run agentos login)", path, err)
	}
	if c.Servers == nil {
		c.Servers = map[string]serverCred{}
	}
	return c, path, nil
}

// saveCredential stores cred for server, replacing the file atomically
// (a new 0600 file renamed over the old one: never a partial file).
func saveCredential(server string, cred serverCred) (string, error) {
	c, path, err := loadCredentials()
	if err != nil {
		return path, err
	}
	c.Servers[server] = cred
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return path, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return path, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".credentials-*")
	if err != nil {
		return path, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return path, err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return path, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return path, err
	}
	if err := tmp.Close(); err != nil {
		return path, err
	}
	return path, os.Rename(tmp.Name(), path)
}

// serverToken is the stored token for --server (or $AGENTOS_SERVER, or
// the only server signed in to).
func serverToken(flagServer string) (base string, cred serverCred, err error) {
	c, _, err := loadCredentials()
	if err != nil {
		return "", cred, err
	}
	if flagServer == "" && os.Getenv(envServer) == "" && len(c.Servers) == 1 {
		for s := range c.Servers {
			flagServer = s
		}
	}
	base, err = serverURL(flagServer)
	if err != nil {
		return "", cred, err
	}
	cred, ok := c.Servers[base]
	if !ok || cred.Token == "" {
		return base, cred, authErrorf("not signed in to %s: run agentos login --server %s", base, base)
	}
	if cred.ExpiresAt != "" {
		if t, err := time.Parse(time.RFC3339, cred.ExpiresAt); err == nil && !deviceNow().Before(t) {
			return base, cred, authErrorf("the GitHub token for %s expired at %s: run agentos login --server %s", base, cred.ExpiresAt, base)
		}
	}
	return base, cred, nil
}

// serverRefusal turns an answer of the server to a read into an error:
// 401 means the token is no longer good (exit 6).
func serverRefusal(base string, status int, what string) error {
	switch status {
	case http.StatusUnauthorized:
		return authErrorf("%s refused the stored GitHub token (expired or revoked): run agentos login --server %s", base, base)
	case http.StatusNotFound:
		return fmt.Errorf("%s: not found on %s, or you may not read it", what, base)
	case http.StatusServiceUnavailable:
		return fmt.Errorf("%s could not ask GitHub who you are; try again", base)
	}
	return fmt.Errorf("%s: %s answered HTTP %d", what, base, status)
}
