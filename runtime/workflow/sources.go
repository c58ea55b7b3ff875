package workflow

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentos/agentos/schemas"
	"github.com/agentos/agentos/workflows"
)

// RepoDir is where a repository keeps its own workflow definitions.
const RepoDir = ".agent/workflows"

// Builtin is the embedded workflows/ tree.
func Builtin() Source {
	return Source{Name: "builtin", FS: workflows.FS, Dir: ".", Ignore: workflows.PlaneIgnore}
}

// Sources returns the embedded tree followed by repoDir's .agent/workflows
// (when repoDir is not ""), so the repository adds or overrides.
func Sources(repoDir string) ([]Source, error) {
	out := []Source{Builtin()}
	if repoDir == "" {
		return out, nil
	}
	abs, err := filepath.Abs(repoDir)
	if err != nil {
		return nil, fmt.Errorf("workflow: repository %q: %w", repoDir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("workflow: repository %q: %w", repoDir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("workflow: repository %q is not a directory", repoDir)
	}
	// A symlinked .agent or .agent/workflows would read outside the
	// repository: refuse it rather than follow it.
	for _, rel := range []string{".agent", RepoDir} {
		if fi, err := os.Lstat(filepath.Join(abs, rel)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("workflow: %s in %q is a symbolic link; refusing to follow it", rel, repoDir)
		}
	}
	return append(out, Source{Name: RepoDir, FS: os.DirFS(abs), Dir: RepoDir}), nil
}

// LoadRepo loads the embedded plane plus repoDir's definitions.
func LoadRepo(reg *schemas.Registry, repoDir string) (*Registry, error) {
	srcs, err := Sources(repoDir)
	if err != nil {
		return nil, err
	}
	return Load(reg, srcs...)
}
