package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/viewer"
)

// The run viewer's settings (environment only: two of them are secrets).
const (
	envViewerSecret = "AGENTOS_VIEWER_SECRET"        // signs cookies; ≥ 32 bytes; shared by replicas
	envClientID     = "AGENTOS_GITHUB_CLIENT_ID"     // the GitHub App's Client ID
	envClientSecret = "AGENTOS_GITHUB_CLIENT_SECRET" // a client secret of the app
	envPublicURL    = "AGENTOS_PUBLIC_URL"           // https://bot.example.com: the callback and the tracking link
)

// viewerSettings configure the run viewer of agentos serve.
type viewerSettings struct {
	secret                 string
	clientID, clientSecret string
	publicURL              string
}

func envSecret(getenv func(string) string, name string) (string, error) {
	v, file := getenv(name), getenv(name+"_FILE")
	if v != "" && file != "" {
		return "", fmt.Errorf("%s and %s_FILE are both set; set one", name, name)
	}
	if file == "" {
		return strings.TrimSpace(v), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func loadViewerSettings(getenv func(string) string) (viewerSettings, error) {
	var s viewerSettings
	var err error
	if s.secret, err = envSecret(getenv, envViewerSecret); err != nil {
		return s, err
	}
	if s.clientSecret, err = envSecret(getenv, envClientSecret); err != nil {
		return s, err
	}
	s.clientID = strings.TrimSpace(getenv(envClientID))
	s.publicURL = strings.TrimRight(strings.TrimSpace(getenv(envPublicURL)), "/")
	if s.secret != "" && len(s.secret) < 32 {
		return s, fmt.Errorf("%s has %d bytes; it needs at least 32 (e.g. openssl rand -hex 32)", envViewerSecret, len(s.secret))
	}
	if s.publicURL != "" {
		u, err := url.Parse(s.publicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
			return s, fmt.Errorf("%s=%q: want the server's public base URL, such as https://agentos.example.com", envPublicURL, s.publicURL)
		}
	}
	if (s.clientID != "" || s.clientSecret != "") && (s.clientID == "" || s.clientSecret == "" || s.publicURL == "") {
		return s, fmt.Errorf("sign-in with GitHub needs %s, %s and %s together", envClientID, envClientSecret, envPublicURL)
	}
	return s, nil
}

// secrets are redacted from every log.
func (s viewerSettings) secrets() []string { return []string{s.secret, s.clientSecret} }

func (s viewerSettings) signIn() bool { return s.clientID != "" }

// checker builds the access checker of every read.
func (s viewerSettings) checker(apiToken string) (*access.Checker, error) {
	return s.checkerWith(apiToken, "")
}

// checkerWith is checker that, with sign-in configured, also takes a
// maintainer's GitHub user token (agentos login) as the bearer token of a
// read, asking GitHub's API at apiURL ("": api.github.com) whose it is.
func (s viewerSettings) checkerWith(apiToken, apiURL string) (*access.Checker, error) {
	o := access.Options{Token: apiToken, Secret: []byte(s.secret), Secure: strings.HasPrefix(s.publicURL, "https://")}
	if s.signIn() {
		if apiURL == "" {
			apiURL = "https://api.github.com"
		}
		o.Users = access.GitHubUsers{APIURL: apiURL}
	}
	return access.New(o)
}

// oauth is the sign-in configuration, or nil.
func (s viewerSettings) oauth(apiURL string) (*viewer.OAuth, error) {
	if !s.signIn() {
		return nil, nil
	}
	web, err := dispatch.GitBaseURL(apiURL)
	if err != nil {
		return nil, err
	}
	api := apiURL
	if api == "" {
		api = "https://api.github.com"
	}
	return &viewer.OAuth{ClientID: s.clientID, ClientSecret: s.clientSecret, WebURL: web, APIURL: api, CallbackURL: s.publicURL + "/login/callback"}, nil
}

// viewerAnswers answers approvals from the viewer through the bot, whose
// dispatcher exists once the bot has learned its login from GitHub.
type viewerAnswers struct {
	wired bool // the bot is wired: set will be called
	d     atomic.Pointer[dispatch.Dispatcher]
}

func (v *viewerAnswers) set(d *dispatch.Dispatcher) { v.d.Store(d) }

// errBotStarting is the viewer's answer while the bot is still learning
// its login from GitHub.
var errBotStarting = errors.New("the bot is starting (it has not learned its login from GitHub yet); try again shortly")

func (v *viewerAnswers) Answer(ctx context.Context, a viewer.Answer) error {
	d := v.d.Load()
	if d == nil {
		return errBotStarting
	}
	_, err := d.AnswerFromViewer(ctx, a.SessionID, a.ApprovalID, a.Decision, a.By, a.Reason)
	return err
}
