package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/runtime/setup"
)

// The bot's Go build caches (docs/security.md, "Build caches"): the
// commands of a repository's trusted runs (on its own branches, started
// by someone with write access) share one GOCACHE, so that the second run
// of its tests does not compile the standard library again; a run marked
// Untrusted (a fork's pull request) gets a cache of its own session's,
// never the repository's. Go's cache is content-addressed, but whoever
// can write it can plant an output for any action ID that later builds
// sharing it trust: write access is trust. Each run sees only its own
// cache (the sandbox mounts that directory alone), so repositories are
// kept apart too.
//
// The npm cache and the Go module cache need nothing here: a
// repository's dependency caches (kernel/workspace's DepCaches) are
// already one per repository for trusted runs and one per worktree for
// untrusted ones, writable only by setup commands.
//
// Layout under the root: repo/<key>/go-build (one per repository),
// session/<key>/go-build (one per untrusted session, or per session of a
// worktree whose repository cannot be told), each with a "used" file
// beside go-build whose modification time is the last use (outside what
// commands can write).
const (
	buildCacheRepo    = "repo"
	buildCacheSession = "session"
	buildCacheUsed    = "used"
)

// Trim rules: Go removes the entries of a cache it uses that were unused
// for 5 days; a repository's cache nobody uses any more is removed whole
// after as long, a session's after a day. Above buildCacheMaxBytes in
// all, the least recently used caches go first, never one used within
// buildCacheBusy (a run may be using it). Checked at most once per
// buildCacheTrimEvery, in the background of a run's start.
const (
	buildCacheRepoIdle    = 5 * 24 * time.Hour
	buildCacheSessionIdle = 24 * time.Hour
	buildCacheMaxBytes    = 10 << 30
	buildCacheBusy        = time.Hour
	buildCacheTrimEvery   = time.Hour
)

// buildCaches hands each run's sandbox its Go build cache. It is safe for
// concurrent use.
type buildCaches struct {
	root string
	// repo names the repository of a session worktree ("" = cannot be
	// told: the run gets a cache of its own session's).
	repo     func(dir string) string
	maxBytes int64
	now      func() time.Time
	log      *slog.Logger

	mu       sync.Mutex
	inUse    map[string]int // entry directory → runs using it now
	lastTrim time.Time
	trimming sync.WaitGroup
	busy     bool
}

// serveBuildCaches are the build caches of `agentos serve`, under the
// data directory, or nil when the operator chose otherwise with
// AGENTOS_SANDBOX_GO_CACHE (a directory every run shares, or "worktree":
// one per session worktree) or commands run unconfined.
func serveBuildCaches(getenv func(string) string, dataDir string, sb *sandbox.Sandbox, log *slog.Logger) (*buildCaches, error) {
	if getenv(setup.EnvGoCache) != "" || !sandboxConfines(sb) {
		return nil, nil
	}
	root, err := filepath.Abs(filepath.Join(dataDir, "buildcache"))
	if err != nil {
		return nil, err
	}
	return &buildCaches{root: root, repo: mirrorOf, maxBytes: buildCacheMaxBytes, now: time.Now, log: log}, nil
}

// actionBuildCaches are the build caches of the Action: the repository is
// the workflow's (serverURL/owner/name), the root the user cache
// directory's agentos/sandbox/repos, which lasts on a self-hosted runner
// and which a workflow can keep between jobs with actions/cache. Nil as
// for serveBuildCaches.
func actionBuildCaches(getenv func(string) string, serverURL, repository string, sb *sandbox.Sandbox) (*buildCaches, error) {
	if getenv(setup.EnvGoCache) != "" || !sandboxConfines(sb) {
		return nil, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("the Go build cache: %w (or set %s)", err, setup.EnvGoCache)
	}
	id := ""
	if repository != "" {
		id = "github:" + strings.TrimSuffix(serverURL, "/") + "/" + repository
	}
	return &buildCaches{root: filepath.Join(d, "agentos", "sandbox", "repos"), repo: func(string) string { return id },
		maxBytes: buildCacheMaxBytes, now: time.Now}, nil
}

func sandboxConfines(sb *sandbox.Sandbox) bool {
	m := sb.Mechanism()
	return m != sandbox.None && m != sandbox.Unavailable
}

// mirrorOf names the repository of a session worktree by the mirror whose
// objects it borrows (.git/objects/info/alternates, written by the
// worktree manager; commands cannot write .git): the same for every
// session of the repository, different for every other. "" when there is
// none.
func mirrorOf(dir string) string {
	f, err := os.Open(filepath.Join(dir, ".git", "objects", "info", "alternates"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") && filepath.IsAbs(l) {
			return "mirror:" + filepath.Clean(l)
		}
	}
	return ""
}

// entry is the cache directory of a run: shared by the repository's
// trusted runs, else the session's own.
func (c *buildCaches) entry(r dispatch.EngineRequest) (kind, dir string) {
	id := c.repo(r.Dir)
	kind, name := buildCacheRepo, id
	if r.Untrusted || id == "" {
		kind, name = buildCacheSession, id+"\x00"+r.SessionID+"\x00"+r.Dir
	}
	sum := sha256.Sum256([]byte(name))
	return kind, filepath.Join(c.root, kind, hex.EncodeToString(sum[:16]))
}

// acquire returns sb with the run's Go build cache, and the func that
// ends its use. A nil c returns sb.
func (c *buildCaches) acquire(sb *sandbox.Sandbox, r dispatch.EngineRequest) (*sandbox.Sandbox, func(), error) {
	if c == nil || !sandboxConfines(sb) {
		return sb, func() {}, nil
	}
	_, dir := c.entry(r)
	gocache := filepath.Join(dir, "go-build")
	if err := os.MkdirAll(gocache, 0o700); err != nil {
		return nil, nil, fmt.Errorf("the Go build cache: %w", err)
	}
	s, err := sb.WithGoCache(gocache)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	if c.inUse == nil {
		c.inUse = map[string]int{}
	}
	c.inUse[dir]++
	c.touch(dir)
	trim := !c.busy && c.now().Sub(c.lastTrim) >= buildCacheTrimEvery
	if trim {
		c.busy, c.lastTrim = true, c.now()
		c.trimming.Add(1)
	}
	c.mu.Unlock()
	if trim {
		go func() {
			defer c.trimming.Done()
			c.trim()
			c.mu.Lock()
			c.busy = false
			c.mu.Unlock()
		}()
	}
	var once sync.Once
	return s, func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.inUse[dir]--; c.inUse[dir] <= 0 {
				delete(c.inUse, dir)
			}
			c.touch(dir)
		})
	}, nil
}

// touch records a use of the entry dir (c.mu held).
func (c *buildCaches) touch(dir string) {
	p := filepath.Join(dir, buildCacheUsed)
	now := c.now()
	if err := os.Chtimes(p, now, now); err != nil {
		if err := os.WriteFile(p, nil, 0o600); err == nil {
			_ = os.Chtimes(p, now, now)
		}
	}
}

// cacheEntry is one cache directory found by trim.
type cacheEntry struct {
	dir  string
	kind string
	used time.Time
	size int64
}

// trim applies the trim rules, and returns what it removed.
func (c *buildCaches) trim() []string {
	var entries []cacheEntry
	for _, kind := range []string{buildCacheRepo, buildCacheSession} {
		des, err := os.ReadDir(filepath.Join(c.root, kind))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				c.warn("cannot list the Go build caches", err)
			}
			continue
		}
		for _, de := range des {
			if !de.IsDir() {
				continue
			}
			e := cacheEntry{dir: filepath.Join(c.root, kind, de.Name()), kind: kind}
			if fi, err := os.Stat(filepath.Join(e.dir, buildCacheUsed)); err == nil {
				e.used = fi.ModTime()
			} else if fi, err := os.Stat(e.dir); err == nil {
				e.used = fi.ModTime()
			}
			entries = append(entries, e)
		}
	}
	now := c.now()
	var removed []string
	remove := func(e cacheEntry, why string) bool {
		c.mu.Lock()
		busy := c.inUse[e.dir] > 0
		c.mu.Unlock()
		if busy {
			return false
		}
		if err := removeCacheTree(e.dir); err != nil {
			c.warn("cannot remove a Go build cache", err)
			return false
		}
		removed = append(removed, e.dir)
		if c.log != nil {
			c.log.Info("removed a Go build cache", "dir", e.dir, "why", why, "last_used", e.used.UTC().Format(time.RFC3339))
		}
		return true
	}
	var kept []cacheEntry
	var total int64
	for _, e := range entries {
		idle := buildCacheRepoIdle
		if e.kind == buildCacheSession {
			idle = buildCacheSessionIdle
		}
		if now.Sub(e.used) > idle && remove(e, "unused for "+idle.String()) {
			continue
		}
		e.size = treeSize(e.dir)
		total += e.size
		kept = append(kept, e)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].used.Before(kept[j].used) })
	for _, e := range kept {
		if total <= c.maxBytes {
			break
		}
		if now.Sub(e.used) > buildCacheBusy && remove(e, fmt.Sprintf("the caches hold %d MiB, above %d MiB", total>>20, c.maxBytes>>20)) {
			total -= e.size
		}
	}
	return removed
}

func (c *buildCaches) warn(msg string, err error) {
	if c.log != nil {
		c.log.Warn(msg, "root", c.root, "error", err)
	}
}

// wait waits for a trim in progress (tests).
func (c *buildCaches) wait() { c.trimming.Wait() }

// treeSize is the bytes of the regular files under dir (symbolic links
// are not followed).
func treeSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// removeCacheTree removes dir, also when a command left directories in it
// without write permission.
func removeCacheTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
