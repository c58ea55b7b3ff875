package viewer

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestPagesRefuseAForeignHost: served on a loopback address (as agentos
// serve may be), the viewer's pages answer to the server's own name and
// to its public URL's host, and refuse any other Host (a DNS-rebinding
// page's) with 421 — even to the operator's token.
func TestPagesRefuseAForeignHost(t *testing.T) {
	w := newWorld(t)
	u, _ := url.Parse(w.srv.URL)
	_, port, _ := strings.Cut(u.Host, ":")
	get := func(path, host string) result {
		req, _ := http.NewRequest(http.MethodGet, w.srv.URL+path, nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+opToken)
		return w.do(http.DefaultClient, req)
	}
	for _, host := range []string{u.Host, "localhost:" + port, "[::1]:" + port} {
		for _, path := range []string{"/runs", "/runs/gh-1"} {
			if r := get(path, host); r.status != http.StatusOK {
				t.Errorf("GET %s with Host %s: %d, want 200", path, host, r.status)
			}
		}
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost:1"} {
		for _, path := range []string{"/runs", "/runs/gh-1", "/runs/gh-1/parts", "/assets/viewer.css", "/login"} {
			r := get(path, host)
			if r.status != http.StatusMisdirectedRequest || strings.Contains(r.body, "gh-1") {
				t.Errorf("GET %s with Host %s: %d %.200s, want 421", path, host, r.status, r.body)
			}
		}
	}
}
