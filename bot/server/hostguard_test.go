package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func TestLoopbackHost(t *testing.T) {
	v4 := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	v6 := &net.TCPAddr{IP: net.IPv6loopback, Port: 8080}
	other := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 80}
	for _, tc := range []struct {
		host  string
		local net.Addr
		ok    bool
	}{
		{"127.0.0.1:8080", v4, true},
		{"localhost:8080", v4, true},
		{"LOCALHOST:8080", v4, true},
		{"[::1]:8080", v4, true},
		{"[::1]:8080", v6, true},
		{"127.0.0.1:8080", v6, true},
		{"127.0.0.2:80", other, true}, // the address it listens on
		{"127.0.0.2", other, true},    // no port: 80
		{"localhost", other, true},
		{"localhost", v4, false},      // port 80, not 8080
		{"localhost:8081", v4, false}, // another port
		{"127.0.0.3:8080", v4, false},
		{"evil.example:8080", v4, false},
		{"evil.example", v4, false},
		{"localhost.evil.example:8080", v4, false},
		{"127.0.0.1.nip.io:8080", v4, false},
		{"", v4, false},
		{"[::1]", v6, false}, // port 80
	} {
		if got := LoopbackHost(tc.host, tc.local); got != tc.ok {
			t.Errorf("LoopbackHost(%q, %s) = %v, want %v", tc.host, tc.local, got, tc.ok)
		}
	}
}

// get sends GET path to srv with the given Host header.
func getHost(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestLoopbackOnlyRefusesForeignHost: a server with LoopbackOnly answers
// to its own name on every route (unknown ones too) and refuses any other
// Host with 421, as a DNS-rebinding page's requests carry.
func TestLoopbackOnlyRefusesForeignHost(t *testing.T) {
	s, _ := newServer(t, Options{Addr: "127.0.0.1:0", LoopbackOnly: true, Routes: []func(gin.IRouter){func(r gin.IRouter) {
		r.GET("/secret", func(c *gin.Context) { c.String(http.StatusOK, "session log") })
	}}})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port} {
		if code, body := getHost(t, srv.URL+"/secret", host); code != http.StatusOK || body != "session log" {
			t.Errorf("Host %s: %d %s, want 200", host, code, body)
		}
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "localhost:1", "attacker.test:" + port} {
		for _, path := range []string{"/secret", "/nowhere"} {
			code, body := getHost(t, srv.URL+path, host)
			if code != http.StatusMisdirectedRequest || strings.Contains(body, "session log") || !strings.Contains(body, "DNS rebinding") {
				t.Errorf("Host %s %s: %d %s, want 421 saying why", host, path, code, body)
			}
		}
	}
}

// TestHostGuardOnlyOnLoopback: a request that arrived on an address
// reachable from the network passes whatever its Host (credentials
// protect such a server); extra hosts pass on loopback too.
func TestHostGuardOnlyOnLoopback(t *testing.T) {
	h := gin.New()
	h.Use(HostGuard("bot.example.com"))
	h.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	serve := func(local net.Addr, host string) int {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		if local != nil {
			req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, local))
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9000}
	lan := &net.TCPAddr{IP: net.IPv4(192, 168, 1, 5), Port: 9000}
	for _, tc := range []struct {
		local net.Addr
		host  string
		want  int
	}{
		{lo, "evil.example:9000", http.StatusMisdirectedRequest},
		{lo, "BOT.example.com", http.StatusOK},
		{lo, "bot.example.com.evil.example", http.StatusMisdirectedRequest},
		{lo, "127.0.0.1:9000", http.StatusOK},
		{lan, "evil.example:9000", http.StatusOK},
	} {
		if got := serve(tc.local, tc.host); got != tc.want {
			t.Errorf("local %s, Host %s: %d, want %d", tc.local, tc.host, got, tc.want)
		}
	}
}

func TestLoopbackOnlyRefusesOtherListener(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Skip(err)
	}
	s, _ := newServer(t, Options{Listener: ln, LoopbackOnly: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Run(ctx); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("Run on %s = %v, want a refusal", ln.Addr(), err)
	}
}
