package viewer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// exchange trades the code for a user access token (golang.org/x/oauth2's
// code exchange, the client secret in the form as GitHub takes it) and
// asks GitHub whose it is.
func (o *OAuth) exchange(ctx context.Context, code string) (string, error) {
	hc := o.Client
	if hc == nil {
		hc = &http.Client{Timeout: 15 * time.Second}
	}
	conf := &oauth2.Config{
		ClientID:     o.ClientID,
		ClientSecret: o.ClientSecret,
		RedirectURL:  o.CallbackURL,
		Endpoint: oauth2.Endpoint{
			AuthURL:   strings.TrimRight(o.WebURL, "/") + "/login/oauth/authorize",
			TokenURL:  strings.TrimRight(o.WebURL, "/") + "/login/oauth/access_token",
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}
	tok, err := conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, hc), code)
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re) && re.ErrorCode != "":
		// GitHub's own words: bad_verification_code, redirect_uri_mismatch ...
		return "", fmt.Errorf("access token: %s %s", re.ErrorCode, re.ErrorDescription)
	case errors.As(err, &re) && re.Response != nil:
		return "", fmt.Errorf("access token: HTTP %d", re.Response.StatusCode)
	case err != nil:
		return "", fmt.Errorf("access token: %w", err)
	case tok.AccessToken == "":
		return "", errors.New("access token: an answer without a token")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(o.APIURL, "/")+"/user", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	var user struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	}
	if err := doJSON(hc, req, &user); err != nil {
		return "", fmt.Errorf("GET /user: %w", err)
	}
	if user.Login == "" {
		return "", errors.New("GET /user: no login")
	}
	if user.Type != "" && user.Type != "User" {
		return "", fmt.Errorf("GET /user: account type %s cannot sign in", user.Type)
	}
	return user.Login, nil
}

func doJSON(hc *http.Client, req *http.Request, v any) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return json.Unmarshal(b, v)
}
