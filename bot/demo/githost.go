package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// gitEnv is a hermetic environment for the git CLI: no user or system
// configuration, no prompts, and a human author for the seed commit.
func gitEnv(home string) []string {
	return append(os.Environ(),
		"HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"),
		"GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_AUTHOR_NAME=Mona Maintainer", "GIT_AUTHOR_EMAIL=mona@example.com",
		"GIT_COMMITTER_NAME=Mona Maintainer", "GIT_COMMITTER_EMAIL=mona@example.com",
	)
}

// git runs the git CLI in dir and returns its trimmed standard output.
func git(ctx context.Context, home, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(home)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimRight(out.String(), "\n"), nil
}

// seedBare creates root/<owner>/<name>.git with the files of src committed
// on main by a human, and returns the bare repository's directory.
func seedBare(ctx context.Context, home, root, owner, name, src string) (string, error) {
	bare := filepath.Join(root, owner, name+".git")
	if err := os.MkdirAll(bare, 0o755); err != nil {
		return "", err
	}
	steps := []struct {
		dir  string
		args []string
	}{
		{bare, []string{"init", "-q", "--bare", "-b", "main"}},
		{bare, []string{"config", "http.receivepack", "true"}},
		{src, []string{"init", "-q", "-b", "main"}},
		{src, []string{"add", "-A"}},
		{src, []string{"commit", "-q", "-m", "Add the token check"}},
		{src, []string{"push", "-q", bare, "HEAD:refs/heads/main"}},
	}
	for _, s := range steps {
		if _, err := git(ctx, home, s.dir, s.args...); err != nil {
			return "", fmt.Errorf("seed %s/%s: %w", owner, name, err)
		}
	}
	return bare, nil
}
