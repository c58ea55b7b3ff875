package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRule(t *testing.T) {
	cases := []struct {
		in, want string
		bad      bool
	}{
		{in: "registry.npmjs.org", want: "registry.npmjs.org"},
		{in: " Proxy.Golang.org:443 ", want: "proxy.golang.org:443"},
		{in: "*.githubusercontent.com", want: "*.githubusercontent.com"},
		{in: "10.0.0.7:8081", want: "10.0.0.7:8081"},
		{in: "[fd00::7]:8081", want: "[fd00::7]:8081"},
		{in: "*", want: "*"},
		{in: "", bad: true},
		{in: "host:0", bad: true},
		{in: "host:70000", bad: true},
		{in: "*.com", bad: true},
		{in: "a*.example.com", bad: true},
		{in: "exa mple.com", bad: true},
		{in: "example..com", bad: true},
		{in: "http://example.com", bad: true},
		{in: "[nope]:1", bad: true},
	}
	for _, c := range cases {
		r, err := ParseRule(c.in)
		switch {
		case c.bad && err == nil:
			t.Errorf("ParseRule(%q) = %v, want an error", c.in, r)
		case !c.bad && err != nil:
			t.Errorf("ParseRule(%q): %v", c.in, err)
		case !c.bad && r.String() != c.want:
			t.Errorf("ParseRule(%q) = %q, want %q", c.in, r.String(), c.want)
		}
	}
}

func TestRuleMatchAndCovers(t *testing.T) {
	rule := func(s string) Rule {
		t.Helper()
		r, err := ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	match := []struct {
		rule, host string
		port       int
		want       bool
	}{
		{"registry.npmjs.org", "registry.npmjs.org", 443, true},
		{"registry.npmjs.org", "REGISTRY.npmjs.org.", 80, true},
		{"registry.npmjs.org", "registry.npmjs.org", 22, false},
		{"registry.npmjs.org", "evil-registry.npmjs.org", 443, false},
		{"*.npmjs.org", "registry.npmjs.org", 443, true},
		{"*.npmjs.org", "npmjs.org", 443, false},
		{"*.npmjs.org", "npmjs.org.evil.com", 443, false},
		{"proxy.golang.org:8443", "proxy.golang.org", 8443, true},
		{"proxy.golang.org:8443", "proxy.golang.org", 443, false},
		{"10.0.0.7:8081", "10.0.0.7", 8081, true},
		{"*", "anything.example", 443, true},
		{"*", "anything.example", 25, false},
	}
	for _, c := range match {
		if got := rule(c.rule).Match(c.host, c.port); got != c.want {
			t.Errorf("%s matches %s:%d = %v, want %v", c.rule, c.host, c.port, got, c.want)
		}
	}
	covers := []struct {
		base, repo string
		want       bool
	}{
		{"*.npmjs.org", "registry.npmjs.org", true},
		{"*.npmjs.org", "*.npmjs.org", true},
		{"*.npmjs.org", "*.registry.npmjs.org", true},
		{"registry.npmjs.org", "*.npmjs.org", false},
		{"registry.npmjs.org:443", "registry.npmjs.org", false},
		{"registry.npmjs.org", "registry.npmjs.org:443", true},
		{"*", "example.com:443", true},
		{"example.com", "*", false},
		{"10.0.0.7:8081", "10.0.0.7:8081", true},
	}
	for _, c := range covers {
		if got := rule(c.base).Covers(rule(c.repo)); got != c.want {
			t.Errorf("%s covers %s = %v, want %v", c.base, c.repo, got, c.want)
		}
	}
	kept, dropped := Narrow([]string{"*.npmjs.org", "proxy.golang.org:443"}, []string{"registry.npmjs.org", "proxy.golang.org", "evil.example", "not a host"})
	if fmt.Sprint(kept) != "[registry.npmjs.org]" || fmt.Sprint(dropped) != "[proxy.golang.org evil.example not a host]" {
		t.Errorf("Narrow: kept %v, dropped %v", kept, dropped)
	}
}

// TestProxy drives the egress proxy as a client inside the sandbox would
// (Go's own proxy support), without a sandbox.
func TestProxy(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			t.Error("the proxy's credentials reached the upstream")
		}
		fmt.Fprint(w, "upstream "+r.URL.Path)
	}))
	defer upstream.Close()
	tlsUp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls upstream") }))
	defer tlsUp.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := upstream.Listener.Addr().String()
	tup := tlsUp.Listener.Addr().String()
	p, err := NewProxy(ln, []string{up, tup, "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := func(proxyURL string, tlsClient bool) *http.Client {
		u, _ := url.Parse(proxyURL)
		tr := &http.Transport{Proxy: http.ProxyURL(u)}
		if tlsClient {
			tr.TLSClientConfig = tlsUp.Client().Transport.(*http.Transport).TLSClientConfig
		}
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	get := func(c *http.Client, u string) (int, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	good := p.URL(ln.Addr().String())
	if code, body := get(client(good, false), "http://"+up+"/x"); code != 200 || body != "upstream /x" {
		t.Errorf("plain HTTP through the proxy: %d %q", code, body)
	}
	if code, body := get(client(good, true), "https://"+tup+"/"); code != 200 || body != "tls upstream" {
		t.Errorf("HTTPS (CONNECT) through the proxy: %d %q", code, body)
	}
	if code, _ := get(client(good, false), "http://127.0.0.1:1/"); code != http.StatusForbidden {
		t.Errorf("a host outside the allow-list: %d, want 403", code)
	}
	if code, _ := get(client("http://agentos:wrong@"+ln.Addr().String(), false), "http://"+up+"/"); code != http.StatusProxyAuthRequired {
		t.Errorf("a wrong token: %d, want 407", code)
	}
	// A name on the list that resolves to loopback is not reached.
	_, port, _ := net.SplitHostPort(up)
	p2, err := NewProxy(mustListen(t), []string{"localhost:" + port})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if code, body := get(client(p2.URL(p2.ln.Addr().String()), false), "http://localhost:"+port+"/"); code != http.StatusBadGateway || !strings.Contains(body, "does not reach by name") {
		t.Errorf("a name resolving to loopback: %d %q, want 502", code, body)
	}
	if d := p.Denied(); len(d) != 1 || d[0] != "127.0.0.1:1" {
		t.Errorf("Denied() = %v", d)
	}
}

func mustListen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestGitGuard: where .git cannot be read-only, what a command does to its
// control files is undone and reported.
func TestGitGuard(t *testing.T) {
	work := t.TempDir()
	files := map[string]string{".git/config": "[core]\n", ".git/HEAD": "ref: refs/heads/main\n", ".git/hooks/pre-commit.sample": "#!/bin/sh\n", ".git/objects/ab/cdef": "blob", "main.go": "package main\n"}
	for p, c := range files {
		full := filepath.Join(work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g, err := snapshotGit(work)
	if err != nil {
		t.Fatal(err)
	}
	// Untouched control files, and other changes (objects, the worktree): no error.
	if err := os.WriteFile(filepath.Join(work, ".git/objects/ab/new"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "main.go"), []byte("package main // changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g.verify(); err != nil {
		t.Fatalf("verify after harmless changes: %v", err)
	}
	// A rewritten config, a planted hook, HEAD replaced by a symlink.
	if err := os.WriteFile(filepath.Join(work, ".git/config"), []byte("[core]\n\tfsmonitor = /tmp/x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, ".git/hooks/pre-push"), []byte("#!/bin/sh\nevil\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(work, ".git/HEAD"))
	if err := os.Symlink("/etc/passwd", filepath.Join(work, ".git/HEAD")); err != nil {
		t.Fatal(err)
	}
	err = g.verify()
	var te *GitTamperError
	if !errors.As(err, &te) || fmt.Sprint(te.Paths) != "[.git/HEAD .git/config .git/hooks/pre-push]" {
		t.Fatalf("verify = %v, want the three paths", err)
	}
	for p, want := range map[string]string{".git/config": "[core]\n", ".git/HEAD": "ref: refs/heads/main\n"} {
		fi, err := os.Lstat(filepath.Join(work, p))
		b, _ := os.ReadFile(filepath.Join(work, p))
		if err != nil || !fi.Mode().IsRegular() || string(b) != want {
			t.Errorf("%s not restored: %q", p, b)
		}
	}
	if _, err := os.Lstat(filepath.Join(work, ".git/hooks/pre-push")); err == nil {
		t.Error("the planted hook is still there")
	}
	if b, _ := os.ReadFile("/etc/passwd"); strings.Contains(string(b), "ref: refs/heads/main") {
		t.Fatal("the restore wrote through the planted symlink")
	}
}

func TestParseModeAndLimits(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeAuto, "auto": ModeAuto, " BWRAP ": ModeBwrap, "landlock": ModeLandlock, "none": ModeNone} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseMode("docker"); err == nil {
		t.Error("ParseMode accepted docker")
	}
	got := Limits{Processes: 10}.Or(DefaultLimits())
	if got.Processes != 10 || got.CPU != DefaultLimits().CPU || got.FileSize != DefaultLimits().FileSize {
		t.Errorf("Or: %+v", got)
	}
}

// TestFailClosed: a sandbox that cannot be set up refuses commands and
// says how to fix it; only the explicit mode none runs them unconfined.
func TestFailClosed(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	req := Request{Argv: []string{"true"}, Work: work, Dir: work}
	cases := []struct {
		name    string
		cfg     Config
		wantFix string
	}{
		{"bwrap missing", Config{Mode: ModeBwrap, Bwrap: filepath.Join(work, "no-bwrap")}, ""},
		{"launcher that does not launch", Config{Mode: ModeLandlock, Launcher: "/bin/true"}, ""},
	}
	for _, c := range cases {
		s := Detect(ctx, c.cfg)
		err := s.Err()
		var ue *UnavailableError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnavailable) || s.Mechanism() != Unavailable {
			t.Fatalf("%s: Err() = %v, mechanism %s", c.name, err, s.Mechanism())
		}
		if !strings.Contains(err.Error(), "sandbox: none") || len(ue.Tried) == 0 || ue.Tried[0].Error == "" {
			t.Errorf("%s: the error names no fix: %v", c.name, err)
		}
		if _, err := s.Command(ctx, req); !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: Command = %v, want refused", c.name, err)
		}
		if r := s.Report(); r.Ready || r.Error == "" {
			t.Errorf("%s: report %+v", c.name, r)
		}
	}
	var nilSandbox *Sandbox
	if _, err := nilSandbox.Command(ctx, req); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a nil sandbox ran a command: %v", err)
	}
	none := Detect(ctx, Config{Mode: ModeNone})
	if none.Err() != nil || none.Mechanism() != None || none.Report().Warning == "" {
		t.Fatalf("mode none: %v %s %+v", none.Err(), none.Mechanism(), none.Report())
	}
	if p := none.Profile(work, nil, Limits{}); p.Network != "host" || len(p.Notes) == 0 {
		t.Errorf("mode none profile: %+v", p)
	}
}
