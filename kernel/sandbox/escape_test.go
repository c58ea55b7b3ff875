package sandbox_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/workspace"
)

// fixture is a host laid out like the bot's: a data directory, the GitHub
// App key, another session's worktree, a directory outside everything,
// the Go module cache, a TCP listener on loopback (and one on
// PostgreSQL's port), a UDP listener, and a process of the same user
// whose environment holds a token.
type fixture struct {
	base, work, other, key, data, outside, modcache string
	// sock is a unix socket listening outside the worktree, abstract an
	// abstract one; sockAccepted counts connections to either.
	sock, abstract                                string
	sockAccepted                                  atomic.Int32
	keySecret, dataSecret, otherSecret, envSecret string
	port, pgPort, udpPort                         int
	accepted, pgAccepted, udpGot                  atomic.Int32
	decoy                                         int
	// dotenv is the content of the worktree's .env (credentials beside
	// the code, hidden by the policy's deny patterns).
	dotenv string
}

func token(t *testing.T, prefix string) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hex.EncodeToString(b[:])
}

func write(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newFixture(t *testing.T, modcache string) *fixture {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{base: base, modcache: modcache,
		keySecret: token(t, "KEY"), dataSecret: token(t, "DATA"), otherSecret: token(t, "OTHER"), envSecret: token(t, "ghs_ENV")}
	f.key = filepath.Join(base, "keys", "app.private-key.pem")
	f.data = filepath.Join(base, "data")
	f.work = filepath.Join(base, "sessions", "this")
	f.other = filepath.Join(base, "sessions", "other")
	f.outside = filepath.Join(base, "outside")
	write(t, f.key, "-----BEGIN RSA PRIVATE KEY-----\n"+f.keySecret+"\n")
	write(t, filepath.Join(f.data, "agentos.db"), f.dataSecret)
	write(t, filepath.Join(f.other, "secret.txt"), f.otherSecret)
	write(t, filepath.Join(f.work, "README.md"), "sample\n")
	f.dotenv = "API_KEY=" + token(t, "DOTENV")
	write(t, filepath.Join(f.work, ".env"), f.dotenv)
	write(t, filepath.Join(f.work, ".git", "config"), "[core]\n\trepositoryformatversion = 0\n")
	write(t, filepath.Join(f.work, ".git", "HEAD"), "ref: refs/heads/main\n")
	for _, d := range []string{f.outside, f.modcache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Symlinks planted in the repository, as a pull request can.
	for name, target := range map[string]string{"key-link": f.key, "up": "..", "proc-root": "/proc/1/root"} {
		if err := os.Symlink(target, filepath.Join(f.work, name)); err != nil {
			t.Fatal(err)
		}
	}
	f.port = listenTCP(t, "127.0.0.1:0", &f.accepted)
	f.pgPort = 5432
	if ln, err := net.Listen("tcp", "127.0.0.1:5432"); err == nil {
		ln.Close()
		listenTCP(t, "127.0.0.1:5432", &f.pgAccepted)
	} // else a real PostgreSQL listens there: connecting must fail all the same
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	f.udpPort = pc.LocalAddr().(*net.UDPAddr).Port
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			f.udpGot.Add(1)
		}
	}()
	decoy := exec.Command("sleep", "600")
	decoy.Env = []string{"PATH=/usr/bin:/bin", "AGENTOS_GITHUB_TOKEN=" + f.envSecret}
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	f.decoy = decoy.Process.Pid
	t.Cleanup(func() { _ = decoy.Process.Kill(); _ = decoy.Wait() })
	// A database's or Docker's local socket, by path and abstract.
	f.sock = filepath.Join(f.outside, "db.sock")
	f.abstract = "@" + token(t, "agentos-escape")
	for _, addr := range []string{f.sock, f.abstract} {
		listenCounting(t, "unix", addr, &f.sockAccepted)
	}
	// The repository has a submodule that is not checked out: a gitlink
	// in the index and an empty directory (a pull request can add one).
	gitInit(t, f.work)
	return f
}

// gitInit makes work's .git a real repository (keeping the fixture's
// config) whose index has a gitlink at sub.
func gitInit(t *testing.T, work string) {
	t.Helper()
	for _, args := range [][]string{
		{"init", "-q"},
		{"update-index", "--add", "--cacheinfo", "160000,1111111111111111111111111111111111111111,sub"},
	} {
		cmd := exec.Command("git", append([]string{"-C", work}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	write(t, filepath.Join(work, ".git", "config"), "[core]\n\trepositoryformatversion = 0\n")
	if err := os.MkdirAll(filepath.Join(work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// userGitStatus runs the user's ordinary `git status` in the worktree,
// as after `agentos tool call test.run`: with the user's environment.
func userGitStatus(work string) string {
	cmd := exec.Command("git", "-C", work, "status", "--short")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out) + errString(err))
}

// plantRepo is a script that makes planted/ a repository whose
// core.fsmonitor writes marker, and points gitlink (a submodule path) at
// it the way named.
func plantRepo(marker, how string) string {
	return `mkdir -p planted && git init -q planted 2>/dev/null || mkdir -p planted/.git; ` +
		`printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch ` + marker + `; false"\n\tworktree = ../../sub\n' > planted/.git/config; ` + how
}

// fsmonitorBlocked judges a planted-repository case: nothing is left at
// the submodule path and the user's next git status runs nothing.
func fsmonitorBlocked(f *fixture, o outcome) (bool, string) {
	marker := filepath.Join(f.outside, "fsmonitor-ran")
	status := userGitStatus(f.work)
	if _, err := os.Stat(marker); err == nil {
		return false, "the user's git status ran the planted core.fsmonitor"
	}
	if fi, err := os.Lstat(filepath.Join(f.work, "sub", ".git")); err == nil {
		return false, fmt.Sprintf("sub/.git (%s) is still there", fi.Mode().Type())
	}
	var tamper *sandbox.GitTamperError
	if !errors.As(o.err, &tamper) && (o.err == nil || !strings.Contains(o.err.Error(), "submodule path")) {
		return false, fmt.Sprintf("the command did not fail with a tamper error (err %v; git status: %s)", o.err, firstLine(status))
	}
	return true, firstLine(o.err.Error())
}

// unixConnect is a script that connects to a unix socket (a path, or
// @name for an abstract one) and prints CONNECTED.
func unixConnect(addr string) string {
	if strings.HasPrefix(addr, "@") {
		addr = "\\0" + addr[1:]
	}
	return `perl -MSocket -e 'my $a = $ARGV[0]; $a =~ s/^\\0/\0/; socket(my $s, AF_UNIX, SOCK_STREAM, 0) or die "socket: $!\n"; connect($s, pack_sockaddr_un($a)) or die "connect: $!\n"; print "CONNECTED\n"' '` + addr + `'`
}

func notConnected(f *fixture, o outcome) (bool, string) {
	if f.sockAccepted.Load() > 0 || strings.Contains(o.res.Stdout, "CONNECTED") {
		return false, "connected"
	}
	return true, firstLine(o.output())
}

// printed judges a case that prints word when it gets through.
func printed(word string) func(f *fixture, o outcome) (bool, string) {
	return func(f *fixture, o outcome) (bool, string) {
		if strings.Contains(o.res.Stdout, word) {
			return false, word
		}
		return true, firstLine(o.output())
	}
}

func listenTCP(t *testing.T, addr string, n *atomic.Int32) int {
	t.Helper()
	return listenCounting(t, "tcp", addr, n).(*net.TCPAddr).Port
}

// listenCounting listens on addr and counts the connections it accepts
// (and closes) in n, until the test ends.
func listenCounting(t *testing.T, network, addr string, n *atomic.Int32) net.Addr {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln.Addr()
}

// outcome is one run of an escape attempt.
type outcome struct {
	res workspace.RunResult
	err error
}

func (o outcome) output() string { return o.res.Stdout + o.res.Stderr }

// escape is one case of the corpus: a shell script that tries to get out,
// and how to tell whether it was blocked (from the host's point of view
// where that is possible).
type escape struct {
	name    string
	script  func(f *fixture) string
	blocked func(f *fixture, o outcome) (bool, string)
	// control: run the same script unconfined too, and require that it
	// gets out there (the case tests something real).
	control bool
	limits  sandbox.Limits
	timeout time.Duration
	// unenforced, when set, returns why a sandbox documents that it does
	// not enforce what the case tests ("" = it does): the case is then
	// reported, not failed (agentos doctor says the same).
	unenforced func(s *sandbox.Sandbox) string
}

func secretHidden(secret func(f *fixture) string) func(f *fixture, o outcome) (bool, string) {
	return func(f *fixture, o outcome) (bool, string) {
		if strings.Contains(o.output(), secret(f)) {
			return false, "the secret was printed"
		}
		return true, firstLine(o.output())
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

func notCreated(path func(f *fixture) string) func(f *fixture, o outcome) (bool, string) {
	return func(f *fixture, o outcome) (bool, string) {
		if _, err := os.Lstat(path(f)); err == nil {
			return false, path(f) + " was created"
		}
		return true, firstLine(o.output())
	}
}

func keySecret(f *fixture) string   { return f.keySecret }
func dataSecret(f *fixture) string  { return f.dataSecret }
func otherSecret(f *fixture) string { return f.otherSecret }
func envSecret(f *fixture) string   { return f.envSecret }

// processToken marks the processes of the timeout case.
const processToken = "9876543"

func corpus() []escape {
	return []escape{
		{name: "read the key file by absolute path", control: true,
			script: func(f *fixture) string { return "cat " + f.key }, blocked: secretHidden(keySecret)},
		{name: "read the data dir by absolute path", control: true,
			script: func(f *fixture) string { return "ls " + f.data + "; cat " + f.data + "/agentos.db" }, blocked: secretHidden(dataSecret)},
		{name: "read another worktree by absolute path", control: true,
			script: func(f *fixture) string { return "cat " + f.other + "/secret.txt" }, blocked: secretHidden(otherSecret)},
		{name: "read another worktree by ..", control: true,
			script: func(f *fixture) string { return "cat ../other/secret.txt; cat ../../sessions/other/secret.txt" }, blocked: secretHidden(otherSecret)},
		{name: "read the key through a symlink planted in the repository", control: true,
			script: func(f *fixture) string { return "cat key-link" }, blocked: secretHidden(keySecret)},
		{name: "read another worktree through a planted symlink to ..", control: true,
			script: func(f *fixture) string { return "cat up/other/secret.txt" }, blocked: secretHidden(otherSecret)},
		{name: "read the key through /proc/1/root and /proc/$PPID/root", control: true,
			script: func(f *fixture) string {
				return "cat /proc/1/root" + f.key + "; cat proc-root" + f.key + "; cat /proc/$PPID/root" + f.key
			}, blocked: secretHidden(keySecret)},
		{name: "read the key through /proc/self/root and the bot's /proc/PID/root", control: true,
			script: func(f *fixture) string {
				return fmt.Sprintf("cat /proc/self/root%s; cat /proc/%d/root%s", f.key, os.Getpid(), f.key)
			}, blocked: secretHidden(keySecret)},
		{name: "read another worktree through /proc/self/cwd/..", control: true,
			script: func(f *fixture) string { return "cat /proc/self/cwd/../other/secret.txt" }, blocked: secretHidden(otherSecret)},
		{name: "read a process's environment through /proc", control: true,
			script: func(f *fixture) string {
				return fmt.Sprintf("cat /proc/%d/environ; cat /proc/$PPID/environ; cat /proc/1/environ; cat /proc/%d/environ", f.decoy, os.Getpid())
			}, blocked: secretHidden(envSecret)},
		{name: "read /etc/shadow", control: os.Geteuid() == 0,
			script: func(f *fixture) string { return "cat /etc/shadow && echo READ-SHADOW" },
			blocked: func(f *fixture, o outcome) (bool, string) {
				if strings.Contains(o.res.Stdout, "READ-SHADOW") {
					return false, "/etc/shadow was read"
				}
				return true, firstLine(o.output())
			}},
		{name: "list the host's TLS private keys (/etc/ssl/private)", control: os.Geteuid() == 0 && dirExists("/etc/ssl/private"),
			script: func(f *fixture) string { return "ls -a /etc/ssl/private >/dev/null && echo LISTED" },
			blocked: func(f *fixture, o outcome) (bool, string) {
				if strings.Contains(o.res.Stdout, "LISTED") {
					return false, "/etc/ssl/private was listed"
				}
				return true, firstLine(o.output())
			}},
		{name: "write outside the worktree", control: true,
			script:  func(f *fixture) string { return "echo pwned > " + f.outside + "/pwned; echo pwned > ../pwned" },
			blocked: notCreated(func(f *fixture) string { return filepath.Join(f.outside, "pwned") })},
		{name: "write into the read-only module cache", control: true,
			script:  func(f *fixture) string { return "echo pwned > " + f.modcache + "/pwned" },
			blocked: notCreated(func(f *fixture) string { return filepath.Join(f.modcache, "pwned") })},
		{name: "plant a git hook and rewrite .git/config", control: true,
			script: func(f *fixture) string {
				return "mkdir -p .git/hooks && printf '#!/bin/sh\\necho owned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit; printf '[core]\\n\\tfsmonitor = /tmp/evil\\n' >> .git/config"
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				b, _ := os.ReadFile(filepath.Join(f.work, ".git", "config"))
				if strings.Contains(string(b), "fsmonitor") {
					return false, ".git/config was changed"
				}
				if _, err := os.Stat(filepath.Join(f.work, ".git", "hooks", "pre-commit")); err == nil {
					return false, "a hook was planted"
				}
				return true, firstLine(o.output() + errString(o.err))
			}},
		{name: "connect to a listener on 127.0.0.1", control: true,
			script: func(f *fixture) string {
				return fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED'", f.port)
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				if f.accepted.Load() > 0 || strings.Contains(o.res.Stdout, "CONNECTED") {
					return false, "connected"
				}
				return true, firstLine(o.output())
			}},
		{name: "connect to PostgreSQL's port 5432", control: true,
			script: func(f *fixture) string {
				return fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo CONNECTED'", f.pgPort)
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				if f.pgAccepted.Load() > 0 || strings.Contains(o.res.Stdout, "CONNECTED") {
					return false, "connected"
				}
				return true, firstLine(o.output())
			}},
		{name: "send a UDP datagram (DNS-style exfiltration)", control: true,
			script: func(f *fixture) string {
				return fmt.Sprintf("bash -c 'echo leak > /dev/udp/127.0.0.1/%d && echo SENT'; sleep 0.2", f.udpPort)
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				if f.udpGot.Load() > 0 {
					return false, "the datagram arrived"
				}
				return true, firstLine(o.output())
			}},
		{name: "signal a process outside the sandbox", control: true,
			script: func(f *fixture) string {
				return fmt.Sprintf("kill -0 %d && echo SIGNALLED || echo kill-failed", f.decoy)
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				if strings.Contains(o.res.Stdout, "SIGNALLED") {
					return false, "the signal was delivered"
				}
				return true, firstLine(o.output())
			}},
		{name: "read the .env beside the code (then find it back as it was)", control: true,
			script: func(f *fixture) string { return "cat .env; cat ./.env; ls -a; echo overwritten > .env" },
			blocked: func(f *fixture, o outcome) (bool, string) {
				if strings.Contains(o.output(), f.dotenv) {
					return false, "the secret was printed"
				}
				if o.err != nil {
					return false, "the command did not run: " + o.err.Error()
				}
				if b, err := os.ReadFile(filepath.Join(f.work, ".env")); err != nil || string(b) != f.dotenv {
					return false, fmt.Sprintf(".env was not put back as it was: %q %v", b, err)
				}
				return true, "hidden while the command ran, put back after"
			}},
		{name: "connect to a host unix socket by path", control: true,
			script: func(f *fixture) string { return unixConnect(f.sock) }, blocked: notConnected},
		{name: "connect to a host abstract unix socket", control: true,
			script: func(f *fixture) string { return unixConnect(f.abstract) }, blocked: notConnected},
		{name: "connect to PostgreSQL's local socket", control: socketExists("/var/run/postgresql/.s.PGSQL.5432"),
			script:  func(f *fixture) string { return unixConnect("/var/run/postgresql/.s.PGSQL.5432") },
			blocked: printed("CONNECTED")},
		{name: "connect to MariaDB's local socket", control: socketExists("/run/mysqld/mysqld.sock"),
			script:  func(f *fixture) string { return unixConnect("/run/mysqld/mysqld.sock") },
			blocked: printed("CONNECTED")},
		{name: "connect to docker.sock", control: socketExists("/var/run/docker.sock"),
			script:  func(f *fixture) string { return unixConnect("/var/run/docker.sock") },
			blocked: printed("CONNECTED")},
		{name: "open an AF_VSOCK socket (to the hypervisor)",
			script: func(f *fixture) string {
				return `perl -e 'socket(my $s, 40, 1, 0) or die "socket: $!\n"; print "VSOCK-OPEN\n"'`
			},
			blocked: printed("VSOCK-OPEN")},
		{name: "set up io_uring (socket operations past the filter)",
			script: func(f *fixture) string {
				return `perl -e 'my $p = "\0" x 120; my $fd = syscall(425, 1, $p); $fd < 0 and die "io_uring_setup: $!\n"; print "IOURING-OPEN\n"'`
			},
			blocked: printed("IOURING-OPEN")},
		{name: "fill /dev/shm past the tmp limit", limits: sandbox.Limits{Tmp: 4 << 20},
			script: func(f *fixture) string {
				return "head -c 16777216 /dev/zero > /dev/shm/fill; ls -l /dev/shm/fill; head -c 16777216 /dev/zero > /dev/fill && echo DEV-WRITTEN; rm -f /dev/shm/fill"
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				if strings.Contains(o.res.Stdout, "16777216") || strings.Contains(o.res.Stdout, "DEV-WRITTEN") {
					return false, firstLine(o.res.Stdout)
				}
				return true, firstLine(o.output())
			}},
		{name: "plant a repository at a submodule path (gitfile → core.fsmonitor)", control: true,
			script: func(f *fixture) string {
				return plantRepo(filepath.Join(f.outside, "fsmonitor-ran"), `printf 'gitdir: ../planted/.git\n' > sub/.git`)
			},
			blocked: fsmonitorBlocked},
		{name: "plant a repository at a submodule path (a .git directory)", control: true,
			script: func(f *fixture) string {
				return plantRepo(filepath.Join(f.outside, "fsmonitor-ran"), `rm -rf sub/.git && cp -r planted/.git sub/.git && sed -i '/worktree/d' sub/.git/config`)
			},
			blocked: fsmonitorBlocked},
		{name: "add a gitlink to the index, then plant a repository there", control: true,
			script: func(f *fixture) string {
				return plantRepo(filepath.Join(f.outside, "fsmonitor-ran"),
					`git update-index --add --cacheinfo 160000,2222222222222222222222222222222222222222,sub2 && mkdir -p sub2 && printf 'gitdir: ../planted/.git\n' > sub2/.git`)
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				marker := filepath.Join(f.outside, "fsmonitor-ran")
				userGitStatus(f.work)
				if _, err := os.Stat(marker); err == nil {
					return false, "the user's git status ran the planted core.fsmonitor"
				}
				if _, err := os.Lstat(filepath.Join(f.work, "sub2", ".git")); err == nil {
					return false, "sub2/.git is still there"
				}
				return true, firstLine(o.output() + errString(o.err))
			}},
		{name: "fork bomb (stops itself after 400 forks)", limits: sandbox.Limits{Processes: 48}, timeout: 60 * time.Second,
			script: func(f *fixture) string {
				// Each fork that works bumps the counter; a failed fork
				// ends the loop. Bounded, so a broken limit cannot hurt.
				return `i=0; while [ $i -lt 400 ]; do sleep 30 & i=$((i+1)); echo $i > forks; done; echo FINISHED`
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				b, _ := os.ReadFile(filepath.Join(f.work, "forks"))
				n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				if strings.Contains(o.res.Stdout, "FINISHED") || n >= 400 {
					return false, fmt.Sprintf("all %d forks worked", n)
				}
				return true, fmt.Sprintf("stopped after %d forks: %s", n, firstLine(o.res.Stderr))
			}},
		{name: "use more memory than the limit across 8 processes", control: true, limits: sandbox.Limits{Memory: 128 << 20}, timeout: 60 * time.Second,
			unenforced: func(s *sandbox.Sandbox) string {
				if tm := s.Report().TreeMemory; strings.HasPrefix(tm, "none") {
					return tm
				}
				return ""
			},
			script: func(f *fixture) string {
				// Each process stays under the per-process limit (about
				// 40 MB each); together they hold about 320 MB.
				return `for i in 1 2 3 4 5 6 7 8; do perl -e '$x = "a" x 40000000; sleep 3; print "ALIVE\n"' & done; wait`
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				n := strings.Count(o.res.Stdout, "ALIVE")
				if n == 8 {
					return false, "all 8 processes kept their memory"
				}
				return true, fmt.Sprintf("%d of 8 processes survived", n)
			}},
		{name: "fill the disk past the file-size limit", limits: sandbox.Limits{FileSize: 1 << 20},
			script: func(f *fixture) string { return "head -c 8388608 /dev/zero > big; echo WROTE" },
			blocked: func(f *fixture, o outcome) (bool, string) {
				fi, err := os.Stat(filepath.Join(f.work, "big"))
				if err == nil && fi.Size() > 1<<20 {
					return false, fmt.Sprintf("wrote %d bytes", fi.Size())
				}
				return true, fmt.Sprintf("exit %d, file capped at the limit", o.res.ExitCode)
			}},
		{name: "outlive the timeout: ignore SIGTERM, double-fork, new session", timeout: 2 * time.Second,
			script: func(f *fixture) string {
				return `trap '' TERM HUP
sh -c 'trap "" TERM HUP; exec sleep ` + processToken + `1' &
setsid sh -c 'trap "" TERM HUP; (sleep ` + processToken + `2 &); exec sleep ` + processToken + `3' &
(sh -c 'trap "" TERM HUP; exec sleep ` + processToken + `4' &)
echo STARTED
sleep ` + processToken + `0`
			},
			blocked: func(f *fixture, o outcome) (bool, string) {
				var k *kernel.Error
				if !errors.As(o.err, &k) || k.Code != kernel.CodeTimeout {
					return false, fmt.Sprintf("want a TIMEOUT error, got %v", o.err)
				}
				// The kill is asynchronous for a moment: give it time.
				var left []int
				for i := 0; i < 100; i++ {
					if left = survivors(processToken); len(left) == 0 {
						return true, "no process survived"
					}
					time.Sleep(100 * time.Millisecond)
				}
				for _, p := range left {
					_ = (&os.Process{Pid: p}).Kill()
				}
				return false, fmt.Sprintf("%d processes survived", len(left))
			}},
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// survivors lists host processes whose command line contains tok.
func survivors(tok string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(tok)) {
			out = append(out, pid)
		}
	}
	return out
}

// run runs one script in the fixture's worktree through the workspace's
// process runner, the path every exec tool and hook takes.
func run(t *testing.T, s *sandbox.Sandbox, f *fixture, c escape) outcome {
	t.Helper()
	ws, err := workspace.Open(f.work, workspace.Options{Sandbox: s, Limits: c.limits, DenyPatterns: []string{".env"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	timeout := c.timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	res, err := ws.Run(context.Background(), workspace.RunSpec{Argv: []string{"sh", "-c", c.script(f)}, Timeout: timeout, MaxOutput: 1 << 16})
	return outcome{res: res, err: err}
}

// TestEscapeCorpus runs every escape attempt under each mechanism; every
// one must be blocked. The controls run the attempts that can be judged
// safely without a sandbox and require them to get out there.
func TestEscapeCorpus(t *testing.T) {
	cases := corpus()
	t.Run("control", func(t *testing.T) {
		f := newFixture(t, filepath.Join(sharedDir(t), "modcache"))
		for _, c := range cases {
			if !c.control {
				continue
			}
			o := run(t, sandbox.Disabled(), f, c)
			if ok, why := c.blocked(f, o); ok {
				t.Errorf("%s: not even unconfined does it get out (%s): the case tests nothing", c.name, why)
			}
			// Undo what got out.
			os.Remove(filepath.Join(f.outside, "pwned"))
			os.Remove(filepath.Join(f.base, "sessions", "pwned"))
			os.Remove(filepath.Join(f.modcache, "pwned"))
			write(t, filepath.Join(f.work, ".git", "config"), "[core]\n\trepositoryformatversion = 0\n")
			os.RemoveAll(filepath.Join(f.work, ".git", "hooks"))
			os.RemoveAll(filepath.Join(f.work, "sub", ".git"))
			os.RemoveAll(filepath.Join(f.work, "planted"))
			os.RemoveAll(filepath.Join(f.work, "sub2"))
			gitInit(t, f.work)
			os.Remove(filepath.Join(f.outside, "fsmonitor-ran"))
			f.sockAccepted.Store(0)
			f.accepted.Store(0)
			f.pgAccepted.Store(0)
			f.udpGot.Store(0)
		}
	})
	type variant struct {
		name string
		get  func(t *testing.T) *sandbox.Sandbox
	}
	var vs []variant
	for _, mode := range mechanisms {
		vs = append(vs, variant{string(mode), func(t *testing.T) *sandbox.Sandbox { return detect(t, mode) }})
	}
	// Landlock on a host that gives commands no network namespace (IP
	// refused instead).
	vs = append(vs, variant{"landlock-no-netns", func(t *testing.T) *sandbox.Sandbox { return detect(t, sandbox.ModeLandlock).WithoutNetns() }})
	for _, v := range vs {
		mode := v.name
		t.Run(mode, func(t *testing.T) {
			s := v.get(t)
			f := newFixture(t, filepath.Join(sharedDir(t), "modcache"))
			blocked, unenforced := 0, 0
			var report strings.Builder
			for _, c := range cases {
				if c.unenforced != nil {
					if why := c.unenforced(s); why != "" {
						unenforced++
						fmt.Fprintf(&report, "  %-8s %-62s %s\n", "n/a", c.name, "documented as not limited: "+why)
						continue
					}
				}
				o := run(t, s, f, c)
				ok, why := c.blocked(f, o)
				mark := "blocked"
				if ok {
					blocked++
				} else {
					mark = "ESCAPED"
					t.Errorf("%s: %s got out: %s\noutput: %s", mode, c.name, why, o.output())
				}
				fmt.Fprintf(&report, "  %-8s %-62s %s\n", mark, c.name, why)
			}
			t.Logf("escape corpus, %s (uid %d, loopback %s): %d/%d cases blocked, %d documented as not enforced here\n%s", mode, os.Getuid(), s.Report().Loopback, blocked, len(cases)-unenforced, unenforced, report.String())
		})
	}
}

func socketExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().Type() == os.ModeSocket
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
