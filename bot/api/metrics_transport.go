package api

import (
	"net/http"
	"strconv"
	"strings"
)

// Transport returns next (http.DefaultTransport when nil) with every
// request counted in agentos_github_requests_total and the rate limit
// GitHub reports kept in agentos_github_rate_limit_remaining. Install it
// under the GitHub client (go-github, ghinstallation); the labels are
// method and status class only, never a path, so the series stay few.
func (m *Metrics) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &githubTransport{next: next, m: m}
}

type githubTransport struct {
	next http.RoundTripper
	m    *Metrics
}

func (t *githubTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	method := req.Method
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete, http.MethodHead:
	default:
		method = "other"
	}
	if err != nil {
		t.m.ghCalls.WithLabelValues(method, "error").Inc()
		return resp, err
	}
	remaining := resp.Header.Get("X-RateLimit-Remaining")
	status := strconv.Itoa(resp.StatusCode/100) + "xx"
	// A secondary limit (Retry-After) or a spent primary one answers 403
	// or 429: counted apart, since it means waiting, not a bug.
	if (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) &&
		(remaining == "0" || resp.Header.Get("Retry-After") != "") {
		status = "rate_limited"
	}
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		status = "other"
	}
	t.m.ghCalls.WithLabelValues(method, status).Inc()
	if n, err := strconv.ParseFloat(remaining, 64); err == nil && n >= 0 {
		t.m.ghRemaining.WithLabelValues(rateResource(resp.Header.Get("X-RateLimit-Resource"))).Set(n)
	}
	return resp, nil
}

// rateResource bounds the resource label to the names GitHub documents.
func rateResource(r string) string {
	switch r = strings.ToLower(r); r {
	case "":
		return "core"
	case "core", "graphql", "search", "code_search", "integration_manifest", "source_import",
		"code_scanning_upload", "actions_runner_registration", "scim", "dependency_snapshots", "audit_log", "code_scanning_autofix":
		return r
	}
	return "other"
}
