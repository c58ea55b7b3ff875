package sandbox

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Rule is one entry of a network allow-list (policy.yaml network.allow):
//
//	registry.npmjs.org        that host, ports 80 and 443
//	proxy.golang.org:443      that host, that port
//	*.githubusercontent.com   any subdomain (not the domain itself), 80 and 443
//	10.0.0.7:8081             an IP address (a local mirror)
//	[fd00::7]:8081            an IPv6 address
//	*                         any host, 80 and 443 (HTTP(S) through the proxy only)
type Rule struct {
	Host string // lower case; "*" or "*.suffix" for wildcards
	Port int    // 0: 80 and 443
	IP   bool   // Host is an IP literal
}

// ParseRule parses an allow-list entry.
func ParseRule(s string) (Rule, error) {
	in := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return Rule{}, fmt.Errorf("empty network rule")
	}
	host, port := s, 0
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return Rule{}, fmt.Errorf("network rule %q: unclosed [", in)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return Rule{}, fmt.Errorf("network rule %q: want [address]:port", in)
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return Rule{}, fmt.Errorf("network rule %q: %w", in, err)
			}
			port = p
		}
		if net.ParseIP(host) == nil {
			return Rule{}, fmt.Errorf("network rule %q: %q is not an IP address", in, host)
		}
		return Rule{Host: host, Port: port, IP: true}, nil
	}
	if h, p, ok := strings.Cut(s, ":"); ok {
		n, err := parsePort(p)
		if err != nil {
			return Rule{}, fmt.Errorf("network rule %q: %w", in, err)
		}
		host, port = h, n
	}
	if ip := net.ParseIP(host); ip != nil {
		return Rule{Host: ip.String(), Port: port, IP: true}, nil
	}
	if host == "*" {
		return Rule{Host: host, Port: port}, nil
	}
	name := strings.TrimPrefix(host, "*.")
	if name == "" || strings.Contains(name, "*") || len(name) > 253 || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return Rule{}, fmt.Errorf("network rule %q: not a host name, *.domain, IP address or *", in)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return Rule{}, fmt.Errorf("network rule %q: %q is not allowed in a host name", in, c)
		}
	}
	if host != name && !strings.Contains(name, ".") {
		return Rule{}, fmt.Errorf("network rule %q: a wildcard needs a domain with a dot (*.example.com)", in)
	}
	return Rule{Host: host, Port: port}, nil
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q is not 1-65535", s)
	}
	return n, nil
}

func (r Rule) String() string {
	h := r.Host
	if r.IP && strings.Contains(h, ":") {
		h = "[" + h + "]"
		if r.Port == 0 {
			return h
		}
	}
	if r.Port == 0 {
		return h
	}
	return h + ":" + strconv.Itoa(r.Port)
}

func (r Rule) portOK(port int) bool {
	if r.Port == 0 {
		return port == 80 || port == 443
	}
	return port == r.Port
}

// hostOK reports whether host (lower case, no port) matches.
func (r Rule) hostOK(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case r.Host == "*":
		return true
	case strings.HasPrefix(r.Host, "*."):
		return strings.HasSuffix(host, r.Host[1:]) && len(host) > len(r.Host)-1
	case r.IP:
		ip := net.ParseIP(host)
		return ip != nil && ip.Equal(net.ParseIP(r.Host))
	}
	return host == r.Host
}

// Match reports whether a connection to host:port is allowed by r.
func (r Rule) Match(host string, port int) bool { return r.hostOK(host) && r.portOK(port) }

// Covers reports whether every connection o allows, r allows too.
func (r Rule) Covers(o Rule) bool {
	switch {
	case o.Port == 0 && r.Port != 0:
		return false
	case o.Port != 0 && !r.portOK(o.Port):
		return false
	}
	switch {
	case r.Host == "*":
		return true
	case o.Host == "*":
		return false
	case strings.HasPrefix(o.Host, "*."):
		return strings.HasPrefix(r.Host, "*.") && (o.Host == r.Host || strings.HasSuffix(o.Host, r.Host[1:]))
	}
	return r.hostOK(o.Host)
}

// ParseRules parses a list, failing on the first bad entry.
func ParseRules(list []string) ([]Rule, error) {
	out := make([]Rule, 0, len(list))
	for _, s := range list {
		r, err := ParseRule(s)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Narrow keeps the entries of repo that some entry of base covers: a
// repository's allow-list can only ask for part of what the operator
// allows. Entries that do not parse are dropped.
func Narrow(base, repo []string) (kept, dropped []string) {
	b, _ := ParseRules(base)
	for _, s := range repo {
		r, err := ParseRule(s)
		ok := err == nil
		if ok {
			ok = false
			for _, x := range b {
				if x.Covers(r) {
					ok = true
					break
				}
			}
		}
		if ok {
			kept = append(kept, r.String())
		} else {
			dropped = append(dropped, s)
		}
	}
	return kept, dropped
}
