package server

import (
	"net"
	"net/http"
	"strings"

	"github.com/agentos/agentos/bot/api"
	"github.com/gin-gonic/gin"
)

// LoopbackHost reports whether host, a request's Host header, names the
// loopback address local the request arrived on: that address itself, or
// localhost, 127.0.0.1 or [::1], each with local's port (a Host without a
// port means port 80). A page on another origin that had its name
// re-pointed at 127.0.0.1 (DNS rebinding) reaches the same socket with its
// own name in Host, which is how it is told apart.
func LoopbackHost(host string, local net.Addr) bool {
	lh, lp, err := net.SplitHostPort(local.String())
	if err != nil {
		return false
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		h, p = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "80"
	}
	if p != lp {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && (ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback) || ip.Equal(net.ParseIP(lh)))
}

// onLoopback reports whether local is a loopback address.
func onLoopback(local net.Addr) bool {
	h, _, err := net.SplitHostPort(local.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// HostGuard refuses, with 421 Misdirected Request, a request that arrived
// on a loopback address with a Host header that does not name it
// (LoopbackHost) and is not one of hosts (say, the host of the public URL
// a reverse proxy on the same machine forwards with its Host). Requests
// on other addresses pass: a server reachable from the network is
// protected by its credentials, not by the name it is called by. A
// request without a connection's local address (a handler called
// directly, not through net/http's server) passes too.
//
// `agentos mcp serve --http` gets the same protection from the MCP SDK's
// HTTP handler (its default DNS rebinding check).
func HostGuard(hosts ...string) gin.HandlerFunc {
	extra := map[string]bool{}
	for _, h := range hosts {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			extra[h] = true
		}
	}
	return func(c *gin.Context) {
		local, ok := c.Request.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if !ok || local == nil || !onLoopback(local) {
			c.Next()
			return
		}
		host := c.Request.Host
		if LoopbackHost(host, local) || extra[strings.ToLower(host)] {
			c.Next()
			return
		}
		api.Abort(c, http.StatusMisdirectedRequest, "misdirected_host",
			"the Host header "+quoteHost(host)+" does not name this server: it answers only as http://"+local.String()+" (or localhost, 127.0.0.1, [::1] on that port); a request by another name may come from a web page that re-pointed its name here (DNS rebinding)")
	}
}

// quoteHost quotes a caller-supplied Host for a message, bounded.
func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100] + "…"
	}
	return "\"" + strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || r == '"' {
			return '?'
		}
		return r
	}, h) + "\""
}
