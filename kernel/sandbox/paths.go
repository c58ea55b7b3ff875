package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// systemDirs are bound read-only when they exist (a symlink, as on
// merged-/usr systems, is recreated as the same symlink).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcFiles are the parts of /etc programs need: users and groups for
// id lookups, name service and resolver settings, TLS roots, the dynamic
// linker cache, time zone and MIME data, Debian's alternatives. Never
// shadow files, credentials (/etc/npmrc, /etc/gitconfig may hold tokens)
// or the rest.
var etcFiles = []string{
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
	// TLS roots only: /etc/ssl/private and /etc/pki/tls/private hold
	// the host's private keys, readable by their owner (uid 0 keeps that
	// in the sandbox).
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/ca-certificates.conf",
	"/etc/pki/tls/certs", "/etc/pki/ca-trust", "/etc/crypto-policies",
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
	"/etc/localtime", "/etc/timezone", "/etc/mime.types", "/etc/os-release", "/etc/debian_version",
	"/etc/protocols", "/etc/services", "/etc/bash.bashrc", "/etc/profile", "/etc/inputrc", "/etc/terminfo",
}

// link is a host symlink recreated inside the sandbox.
type link struct{ path, target string }

// hostPaths is what a command may see of the host, found once by Detect.
type hostPaths struct {
	links    []link   // system dirs that are symlinks
	system   []string // system dirs that are directories
	etc      []string // existing etcFiles
	tools    []string // toolchains: GOROOT, Node's prefix, PATH dirs, Config.ReadOnly
	modCache string   // Go module cache (read-only), "" if none
	npmCache string   // npm cache (read-only) when configured, "" if none
	path     string   // PATH inside
}

// readOnly lists every read-only path, for profiles and doctor.
func (h hostPaths) readOnly() []string {
	out := append([]string(nil), h.system...)
	for _, l := range h.links {
		out = append(out, l.path+" -> "+l.target)
	}
	out = append(out, "/etc ("+itoa(len(h.etc))+" files: passwd, group, resolver, TLS roots, ld.so)")
	out = append(out, h.tools...)
	if h.modCache != "" {
		out = append(out, h.modCache+" (Go module cache)")
	}
	if h.npmCache != "" {
		out = append(out, h.npmCache+" (npm cache)")
	}
	return out
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// discover finds the host paths commands need.
func discover(getenv func(string) string, extra []string) hostPaths {
	var h hostPaths
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				h.links = append(h.links, link{d, t})
			}
		case fi.IsDir():
			h.system = append(h.system, d)
		}
	}
	for _, f := range etcFiles {
		if _, err := os.Stat(f); err == nil {
			h.etc = append(h.etc, f)
		}
	}
	home := getenv("HOME")
	var tools []string
	add := func(p string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		} else {
			return
		}
		// Never the root, a home directory itself, or one of its parents:
		// those would expose everything below.
		if p == "/" || p == home || (home != "" && strings.HasPrefix(home, p+"/")) {
			return
		}
		tools = append(tools, p)
	}
	path := getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	h.path = path
	// GOROOT: from the environment, else the go found on PATH.
	if g := getenv("GOROOT"); g != "" {
		add(g)
	} else if g := lookIn(path, "go"); g != "" {
		if r, err := filepath.EvalSymlinks(g); err == nil {
			if root := filepath.Dir(filepath.Dir(r)); exists(filepath.Join(root, "src", "runtime")) {
				add(root)
			}
		}
	}
	// Node: the prefix of the node found on PATH (bin/node, lib/node_modules).
	if n := lookIn(path, "node"); n != "" {
		if r, err := filepath.EvalSymlinks(n); err == nil {
			add(filepath.Dir(filepath.Dir(r)))
		}
	}
	for _, d := range filepath.SplitList(path) {
		add(d)
	}
	// Where the PATH's links lead (a directory of links to tools
	// elsewhere, ~/.cargo/bin's proxies): those directories, and the
	// version managers behind them and behind the PATH itself.
	pathDirs := filepath.SplitList(path)
	linked := linkedDirs(pathDirs, h.system, home)
	for _, d := range linked {
		add(d)
	}
	for _, d := range toolchainRoots(getenv, append(pathDirs, linked...), h.system) {
		add(d)
	}
	for _, d := range extra {
		add(d)
	}
	h.tools = minimal(tools, append(append([]string(nil), h.system...), "/etc"))
	// The Go module cache, read-only: GOMODCACHE, else GOPATH's first entry.
	mc := getenv("GOMODCACHE")
	if mc == "" {
		gp := getenv("GOPATH")
		if gp == "" && home != "" {
			gp = filepath.Join(home, "go")
		}
		if gp != "" {
			mc = filepath.Join(filepath.SplitList(gp)[0], "pkg", "mod")
		}
	}
	if mc != "" && exists(mc) {
		if r, err := filepath.EvalSymlinks(mc); err == nil {
			h.modCache = r
		}
	}
	if nc := getenv("npm_config_cache"); nc != "" && exists(nc) {
		if r, err := filepath.EvalSymlinks(nc); err == nil {
			h.npmCache = r
		}
	}
	return h
}

// minimal drops duplicates and paths inside another listed path or inside
// one of covered.
func minimal(paths, covered []string) []string {
	sort.Strings(paths)
	var out []string
	inside := func(p string, list []string) bool {
		for _, c := range list {
			if p == c || strings.HasPrefix(p, c+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range paths {
		if inside(p, covered) || inside(p, out) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func lookIn(path, name string) string {
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// workKey names a worktree's private cache directory.
func workKey(work string) string {
	sum := sha256.Sum256([]byte(work))
	return hex.EncodeToString(sum[:8])
}

// within reports whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// env builds the command's environment inside: private HOME and TMPDIR,
// the private Go build cache, the read-only module cache, and no network
// defaults when the network is off.
func (s *Sandbox) env(req Request, home, tmp string, proxy string) []string {
	set := map[string]string{
		"HOME":        home,
		"TMPDIR":      tmp,
		"GOCACHE":     s.goCacheDir(req.Work),
		"GOPATH":      home + "/go",
		"GOTOOLCHAIN": "local",
		// /etc/gitconfig is not the command's (it may hold credential
		// helpers); under Landlock it exists but is unreadable, and git
		// stops on the error instead of skipping it.
		"GIT_CONFIG_NOSYSTEM": "1",

		"AGENTOS_SANDBOX_MECHANISM":  string(s.mech),
		"npm_config_update_notifier": "false",
		"npm_config_fund":            "false",
		"npm_config_audit":           "false",
		// The proxy variables are set below or removed.
		"HTTP_PROXY": "", "HTTPS_PROXY": "", "http_proxy": "", "https_proxy": "", "ALL_PROXY": "", "all_proxy": "", "NO_PROXY": "", "no_proxy": "",
		"npm_config_proxy": "", "npm_config_https_proxy": "",
	}
	if !hasVar(req.Env, "PATH") {
		set["PATH"] = s.host.path
	}
	if s.host.modCache != "" {
		set["GOMODCACHE"] = s.host.modCache
	} else {
		set["GOMODCACHE"] = home + "/go/pkg/mod"
	}
	if s.host.npmCache != "" {
		set["npm_config_cache"] = s.host.npmCache
		set["npm_config_logs_dir"] = tmp + "/npm-logs"
	} else {
		set["npm_config_cache"] = home + "/.npm"
	}
	if d := req.Deps; d != nil {
		set["GOMODCACHE"], set["npm_config_cache"] = d.GoMod, d.NPM
		set["npm_config_logs_dir"] = tmp + "/npm-logs"
	}
	if proxy == "" {
		set["GOPROXY"] = "off"
		set["npm_config_offline"] = "true"
	} else {
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy"} {
			set[k] = proxy
		}
	}
	return envWith(req.Env, set)
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// toolchainRoots finds what the version managers behind PATH entries need
// besides those entries: a PATH directory of shims (pyenv, rbenv, nodenv,
// asdf, mise) or of links (rustup's ~/.cargo/bin, Volta) only works with
// the manager's own tree, and a bin directory of an installed version
// (nvm, sdkman, pyenv, asdf, rustup toolchains) with its prefix (lib,
// share). Each is read-only in the sandbox. Never a home directory or a
// parent of one, and never the parts of a manager's home that hold
// credentials (~/.cargo's credentials files: only its bin, registry and
// git caches).
func toolchainRoots(getenv func(string) string, pathDirs, system []string) []string {
	home := getenv("HOME")
	var out []string
	addIf := func(p string) {
		if p != "" && exists(p) {
			out = append(out, p)
		}
	}
	inSystem := func(p string) bool {
		for _, s := range append(system, "/etc", "/usr") {
			if within(p, s) {
				return true
			}
		}
		return false
	}
	for _, d := range pathDirs {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		} else {
			continue
		}
		if inSystem(d) {
			continue
		}
		parent, base := filepath.Dir(d), filepath.Base(d)
		switch {
		// pyenv, rbenv, nodenv, goenv: <root>/shims and <root>/bin run
		// <root>/libexec, which runs <root>/versions/*.
		case (base == "shims" || base == "bin") && exists(filepath.Join(parent, "libexec")) && exists(filepath.Join(parent, "versions")):
			addIf(parent)
		// asdf and mise: <data>/shims run <data>/installs/*.
		case base == "shims" && exists(filepath.Join(parent, "installs")):
			addIf(parent)
		// Volta: ~/.volta/bin links into ~/.volta/tools.
		case base == "bin" && filepath.Base(parent) == ".volta":
			addIf(filepath.Join(parent, "tools"))
		// rustup: ~/.cargo/bin holds rustup's proxies, which run the
		// toolchains of RUSTUP_HOME; cargo reads its registry caches.
		case base == "bin" && exists(filepath.Join(d, "rustup")):
			rh := getenv("RUSTUP_HOME")
			if rh == "" && home != "" {
				rh = filepath.Join(home, ".rustup")
			}
			addIf(rh)
			addIf(filepath.Join(parent, "registry"))
			addIf(filepath.Join(parent, "git"))
		}
		// The prefix of an installed version: <...>/versions/<v>/bin
		// (nvm, pyenv), candidates/<c>/<v>/bin (sdkman),
		// installs/<t>/<v>/bin (asdf, mise), toolchains/<t>/bin (rustup).
		if base == "bin" {
			for _, marker := range []string{"/versions/", "/candidates/", "/installs/", "/toolchains/"} {
				if strings.Contains(parent+"/", marker) && exists(filepath.Join(parent, "lib")) {
					addIf(parent)
					break
				}
			}
		}
	}
	// Never a home directory or one of its parents, nor the root.
	var safe []string
	for _, p := range out {
		if p == "/" || p == home || (home != "" && strings.HasPrefix(home, p+"/")) {
			continue
		}
		safe = append(safe, p)
	}
	return safe
}

// secretDirs are directories of a home that hold credentials: a link
// into one never makes it readable.
var secretDirs = []string{".ssh", ".gnupg", ".aws", ".azure", ".config", ".docker", ".kube", ".password-store", ".local/share/keyrings"}

// maxLinks bounds the entries looked at per PATH directory.
const maxLinkScan = 10000

// linkedDirs returns the directories that executables linked from PATH
// directories (outside the system directories) resolve to, where those
// are elsewhere: a PATH made of links, or a bin directory of proxies,
// needs the tools' own directories too. Never a home directory, one of
// its parents, or a directory of credentials.
func linkedDirs(pathDirs, system []string, home string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range pathDirs {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		rd, err := filepath.EvalSymlinks(d)
		if err != nil || inAny(rd, append(system, "/etc")) {
			continue
		}
		ents, err := os.ReadDir(rd)
		if err != nil {
			continue
		}
		for i, e := range ents {
			if i >= maxLinkScan {
				break
			}
			if e.Type()&os.ModeSymlink == 0 {
				continue
			}
			target, err := filepath.EvalSymlinks(filepath.Join(rd, e.Name()))
			if err != nil {
				continue
			}
			fi, err := os.Stat(target)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
				continue
			}
			td := filepath.Dir(target)
			if td == rd || seen[td] || inAny(td, append(system, "/etc")) {
				continue
			}
			seen[td] = true
			if td == "/" || td == home || (home != "" && strings.HasPrefix(home, td+"/")) {
				continue
			}
			secret := false
			for _, s := range secretDirs {
				if home != "" && within(td, filepath.Join(home, s)) {
					secret = true
					break
				}
			}
			if !secret {
				out = append(out, td)
			}
		}
	}
	sort.Strings(out)
	return out
}

func inAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if within(p, d) {
			return true
		}
	}
	return false
}
