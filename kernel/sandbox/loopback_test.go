package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
)

// loopbackScript listens on 127.0.0.1 (TCP and UDP) and talks to itself:
// what a project's tests do with a server of their own.
const loopbackScript = `import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname(), timeout=5); a, _ = s.accept()
c.sendall(b"ping"); print("TCP", a.recv(4).decode())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); v.sendto(b"pong", u.getsockname())
print("UDP", u.recv(4).decode())
`

// reachScript tries to reach the host: each argument is tcp:HOST:PORT,
// udp:HOST:PORT or unix:PATH; it prints REACHED <arg> for each it
// connects to, SENT <arg> for a datagram sent (whether it arrives only
// the host can tell), else the error.
const reachScript = `import socket, sys
for arg in sys.argv[1:]:
    kind, _, addr = arg.partition(":")
    try:
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(2); s.connect(addr)
        else:
            host, _, port = addr.rpartition(":")
            fam = socket.AF_INET6 if ":" in host else socket.AF_INET
            s = socket.socket(fam, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM); s.settimeout(2)
            if kind == "udp":
                s.sendto(b"leak", (host.strip("[]"), int(port))); print("SENT", arg); continue
            s.connect((host.strip("[]"), int(port)))
        print("REACHED", arg)
    except OSError as e:
        print("refused", arg, e)
`

// hostListeners are listeners of the host a command must not reach: TCP
// on every address of the host (loopback and the others), UDP on
// loopback, and a unix socket; got counts what arrived.
type hostListeners struct {
	targets []string
	got     atomic.Int32
}

func listenOnHost(t *testing.T) *hostListeners {
	t.Helper()
	h := &hostListeners{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() || ipn.IP.IsLinkLocalMulticast() {
			continue
		}
		ip := ipn.IP.String()
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			continue
		}
		h.serve(t, ln)
		h.targets = append(h.targets, "tcp:"+ln.Addr().String())
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 16)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			h.got.Add(1)
		}
	}()
	h.targets = append(h.targets, "udp:"+pc.LocalAddr().String())
	sock := filepath.Join(t.TempDir(), "host.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	h.serve(t, ln)
	h.targets = append(h.targets, "unix:"+sock)
	if !strings.Contains(strings.Join(h.targets, " "), "tcp:127.0.0.1:") {
		t.Fatalf("no listener on the host's 127.0.0.1: %v", h.targets)
	}
	return h
}

func (h *hostListeners) serve(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.got.Add(1)
			c.Close()
		}
	}()
}

// TestLoopback: where the sandbox gives commands a loopback of their own
// (bwrap; Landlock with a network namespace), a command's own TCP and
// UDP servers on 127.0.0.1 work; under every mechanism, the host's
// listeners (on its loopback and its other addresses) and its unix
// sockets stay out of reach. Landlock without a namespace (a host that
// refuses them, simulated) refuses loopback as documented. The report
// says which.
func TestLoopback(t *testing.T) {
	testenv.LookPath(t, "python3")
	type variant struct {
		name string
		get  func(t *testing.T) *sandbox.Sandbox
	}
	vs := []variant{
		{"bwrap", func(t *testing.T) *sandbox.Sandbox {
			if _, err := exec.LookPath("bwrap"); err != nil {
				t.Skip("bwrap is not installed")
			}
			return detect(t, sandbox.ModeBwrap)
		}},
		{"landlock", func(t *testing.T) *sandbox.Sandbox { return detect(t, sandbox.ModeLandlock) }},
		{"landlock, no network namespace", func(t *testing.T) *sandbox.Sandbox { return detect(t, sandbox.ModeLandlock).WithoutNetns() }},
	}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			s := v.get(t)
			rep := s.Report()
			private := rep.Loopback == "private"
			t.Logf("loopback: %s", rep.Loopback)
			if v.name == "landlock" && !private {
				// The fallback is the next variant's; this one is the
				// namespace (which bwrap's tests require anyway).
				testenv.Require(t, "a network namespace for Landlock commands", errors.New(rep.Loopback))
			}
			work := t.TempDir()
			res, err := runIn(t, s, work, nil, "python3", "-c", loopbackScript)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			own := strings.Contains(res.Stdout, "TCP ping") && strings.Contains(res.Stdout, "UDP pong")
			switch {
			case private && !own:
				t.Errorf("the report says loopback is private, but a command could not use its own:\n%s%s", res.Stdout, res.Stderr)
			case !private && (own || !strings.Contains(res.Stderr, "Operation not permitted")):
				t.Errorf("the report says loopback is refused (%s), but the command got:\n%s%s", rep.Loopback, res.Stdout, res.Stderr)
			}
			h := listenOnHost(t)
			res, err = runIn(t, s, work, nil, append([]string{"python3", "-c", reachScript}, h.targets...)...)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			time.Sleep(100 * time.Millisecond) // a datagram on its way
			if strings.Contains(res.Stdout, "REACHED") || h.got.Load() > 0 {
				t.Errorf("a command reached the host (%d connections or datagrams arrived):\n%s", h.got.Load(), res.Stdout)
			}
			if n := strings.Count(res.Stdout, "refused ") + strings.Count(res.Stdout, "SENT "); n != len(h.targets) {
				t.Errorf("%d of %d attempts reported, want all:\n%s%s", n, len(h.targets), res.Stdout, res.Stderr)
			}
			t.Logf("from inside:\n%s", res.Stdout)
		})
	}
}

// TestLoopbackGoTest: a Go test that starts an httptest server, the most
// common loopback user, passes where loopback is private.
func TestLoopbackGoTest(t *testing.T) {
	testenv.LookPath(t, "go")
	dir := filepath.Join(sharedDir(t), "sample-httptest")
	if err := writeFiles(dir, map[string]string{
		"go.mod": "module example.com/httptest\n\ngo 1.21\n",
		"server_test.go": `package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "hello" {
		t.Fatalf("got %q", b)
	}
}
`,
	}); err != nil {
		t.Fatal(err)
	}
	for _, mode := range mechanisms {
		t.Run(string(mode), func(t *testing.T) {
			s := detect(t, mode)
			if l := s.Report().Loopback; l != "private" {
				t.Skipf("no private loopback here: %s", l)
			}
			res, err := runIn(t, s, dir, nil, "go", "test", "-count=1", ".")
			if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "ok  \texample.com/httptest") {
				t.Fatalf("go test: err %v, exit %d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
			}
		})
	}
}

// TestNetnsFallback: when the network namespace cannot be set up (the
// launcher refuses the mode, as a kernel refuses an unshare), Detect
// still selects Landlock, without one: loopback refused, said so in the
// report, and the allow-list's proxy reached over the host's loopback as
// before.
func TestNetnsFallback(t *testing.T) {
	testenv.LookPath(t, "python3")
	testenv.LookPath(t, "bash")
	sharedDir(t)
	for _, c := range []struct {
		name  string
		modes []string
		why   string
		want  string
	}{
		{"unshare fails", []string{"no-such-namespace"}, "", "could not be set up (no-such-namespace namespace: "},
		{"user namespaces refused", nil, "user namespaces are disabled (test)", "user namespaces are disabled (test)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := sandbox.DetectNetns(context.Background(), sandbox.Config{Mode: sandbox.ModeLandlock, CacheDir: filepath.Join(sharedDir(t), "cache")}, c.modes, c.why)
			testenv.Require(t, "the landlock sandbox", s.Err())
			rep := s.Report()
			if !strings.HasPrefix(rep.Loopback, "refused: ") || !strings.Contains(rep.Loopback, c.want) {
				t.Errorf("report's loopback %q, want refused with %q", rep.Loopback, c.want)
			}
			if !strings.Contains(strings.Join(rep.Limited, "\n"), "loopback: refused like all IP") {
				t.Errorf("the report's limits do not say that loopback is refused:\n%s", strings.Join(rep.Limited, "\n"))
			}
			work := t.TempDir()
			res, err := runIn(t, s, work, nil, "python3", "-c", loopbackScript)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(res.Stdout, "TCP ping") || !strings.Contains(res.Stderr, "Operation not permitted") {
				t.Errorf("loopback without a network namespace:\n%s%s", res.Stdout, res.Stderr)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from the registry") }))
			defer srv.Close()
			target := srv.Listener.Addr().String()
			res, err = runIn(t, s, work, []string{target}, "bash", "-c", proxyScript, "proxy", target)
			if err != nil || !strings.Contains(res.Stdout, "hello from the registry") {
				t.Errorf("the proxy without a network namespace: %v\n%s%s", err, res.Stdout, res.Stderr)
			}
		})
	}
}
