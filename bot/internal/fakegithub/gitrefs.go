package fakegithub

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"time"
)

// BackWithGit makes a real bare repository on disk the source of truth for
// repo's branch refs: before each request the fake reads them with
// `git for-each-ref`, so pull request heads follow what the bot (or a test
// playing a maintainer) pushed over git, as on GitHub.
func (f *Fake) BackWithGit(repo, gitDir string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gitDirs == nil {
		f.gitDirs = map[string]string{}
	}
	f.gitDirs[strings.ToLower(repo)] = gitDir
}

// syncGitRefs refreshes the refs of git-backed repositories. Called
// without f.mu held.
func (f *Fake) syncGitRefs() {
	f.mu.Lock()
	dirs := make(map[string]string, len(f.gitDirs))
	for k, v := range f.gitDirs {
		dirs[k] = v
	}
	f.mu.Unlock()
	for repo, dir := range dirs {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, "git", "--git-dir", dir, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/").Output()
		cancel()
		if err != nil {
			continue // the repository may not exist yet; keep the seeded refs
		}
		refs := map[string]string{}
		for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			sha, name, ok := strings.Cut(string(line), " ")
			if ok {
				refs[name] = sha
			}
		}
		f.mu.Lock()
		if rs, ok := f.repos[repo]; ok {
			for name := range rs.refs {
				if strings.HasPrefix(name, "refs/heads/") {
					delete(rs.refs, name)
				}
			}
			for name, sha := range refs {
				rs.refs[name] = sha
			}
		}
		f.mu.Unlock()
	}
}
