package sandbox

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// proxyUser is the user name of the proxy's basic authentication; the
// password is a random token per command, so another sandbox (or any
// other local process) that finds the listener cannot use this command's
// allow-list.
const proxyUser = "agentos"

// Proxy is the egress proxy of one command: HTTP CONNECT (HTTPS and any
// TLS) and plain HTTP requests in absolute form, to hosts of the
// allow-list only. It resolves names itself (the sandbox has no DNS), and
// a name never leads to a loopback, link-local, unspecified or multicast
// address: only an IP literal in the allow-list reaches those.
type Proxy struct {
	rules []Rule
	token string
	ln    net.Listener
	srv   *http.Server
	// Dial connects to an allowed address (nil: net.Dialer).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	denied []string
}

// NewProxy serves the allow-list on ln until Close.
func NewProxy(ln net.Listener, allow []string) (*Proxy, error) {
	rules, err := ParseRules(allow)
	if err != nil {
		return nil, err
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	p := &Proxy{rules: rules, token: hex.EncodeToString(b[:]), ln: ln}
	d := &net.Dialer{Timeout: 30 * time.Second}
	p.dial = d.DialContext
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy URL for HTTP_PROXY/HTTPS_PROXY, reached at hostport
// from inside the sandbox.
func (p *Proxy) URL(hostport string) string {
	return "http://" + proxyUser + ":" + p.token + "@" + hostport
}

// Denied lists the host:port requests refused so far.
func (p *Proxy) Denied() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.denied...)
}

// Close stops the proxy and ends open tunnels.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = p.srv.Close()
	}
	return err
}

func (p *Proxy) authorized(r *http.Request) bool {
	h := r.Header.Get("Proxy-Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return false
	}
	want := proxyUser + ":" + p.token
	return subtle.ConstantTimeCompare(b, []byte(want)) == 1
}

func (p *Proxy) allowed(host string, port int) (Rule, bool) {
	for _, r := range p.rules {
		if r.Match(host, port) {
			return r, true
		}
	}
	return Rule{}, false
}

func (p *Proxy) deny(w http.ResponseWriter, status int, hostport, why string) {
	p.mu.Lock()
	if len(p.denied) < 100 {
		p.denied = append(p.denied, hostport)
	}
	p.mu.Unlock()
	http.Error(w, "agentos sandbox: "+why, status)
}

// ServeHTTP implements the proxy.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="agentos sandbox"`)
		http.Error(w, "agentos sandbox: proxy authentication required", http.StatusProxyAuthRequired)
		return
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "agentos sandbox: send absolute http:// URLs or CONNECT", http.StatusBadRequest)
		return
	}
	p.forward(w, r)
}

func splitHostPort(hostport string, defPort int) (string, int, error) {
	host, ps, err := net.SplitHostPort(hostport)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return strings.Trim(hostport, "[]"), defPort, nil
		}
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	return host, port, nil
}

// dialAllowed resolves and connects to host:port for rule r.
func (p *Proxy) dialAllowed(ctx context.Context, r Rule, host string, port int) (net.Conn, error) {
	if r.IP {
		return p.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	if ip := net.ParseIP(host); ip != nil {
		// A name rule (or *) never admits a raw address.
		return nil, fmt.Errorf("%s is an address, and the allow-list names hosts", host)
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	var last error = fmt.Errorf("%s has no address", host)
	for _, a := range ips {
		if a.IP.IsLoopback() || a.IP.IsLinkLocalUnicast() || a.IP.IsLinkLocalMulticast() || a.IP.IsUnspecified() || a.IP.IsMulticast() {
			last = fmt.Errorf("%s resolves to %s, which the proxy does not reach by name", host, a.IP)
			continue
		}
		c, err := p.dial(ctx, "tcp", net.JoinHostPort(a.IP.String(), strconv.Itoa(port)))
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := splitHostPort(r.Host, 443)
	if err != nil {
		http.Error(w, "agentos sandbox: "+err.Error(), http.StatusBadRequest)
		return
	}
	rule, ok := p.allowed(host, port)
	if !ok {
		p.deny(w, http.StatusForbidden, net.JoinHostPort(host, strconv.Itoa(port)), fmt.Sprintf("%s is not in the network allow-list (policy.yaml network.allow)", net.JoinHostPort(host, strconv.Itoa(port))))
		return
	}
	up, err := p.dialAllowed(r.Context(), rule, host, port)
	if err != nil {
		http.Error(w, "agentos sandbox: "+err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "agentos sandbox: cannot tunnel", http.StatusInternalServerError)
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		c.Close()
		up.Close()
		return
	}
	go func() {
		defer c.Close()
		defer up.Close()
		done := make(chan struct{}, 2)
		go func() {
			// Bytes the client sent after the CONNECT header.
			if n := buf.Reader.Buffered(); n > 0 {
				b, _ := buf.Reader.Peek(n)
				_, _ = up.Write(b)
			}
			_, _ = io.Copy(up, c)
			closeWriteConn(up)
			done <- struct{}{}
		}()
		go func() { _, _ = io.Copy(c, up); closeWriteConn(c); done <- struct{}{} }()
		<-done
		<-done
	}()
}

func closeWriteConn(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// hopHeaders are not forwarded (RFC 9110 §7.6.1), nor is the proxy's
// own authorization.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	host, port, err := splitHostPort(r.URL.Host, 80)
	if err != nil {
		http.Error(w, "agentos sandbox: "+err.Error(), http.StatusBadRequest)
		return
	}
	rule, ok := p.allowed(host, port)
	if !ok {
		p.deny(w, http.StatusForbidden, net.JoinHostPort(host, strconv.Itoa(port)), fmt.Sprintf("%s is not in the network allow-list (policy.yaml network.allow)", net.JoinHostPort(host, strconv.Itoa(port))))
		return
	}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return p.dialAllowed(ctx, rule, host, port)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	resp, err := tr.RoundTrip(out)
	if err != nil {
		http.Error(w, "agentos sandbox: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
