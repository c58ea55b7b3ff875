package workflow

import (
	"fmt"
	"io/fs"

	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/schemas"
	"github.com/agentos/agentos/workflows"
)

// RepoDir is where a repository keeps its own workflow definitions.
const RepoDir = ".agent/workflows"

// Builtin is the embedded workflows/ tree.
func Builtin() Source {
	return Source{Name: "builtin", FS: workflows.FS, Dir: ".", Ignore: workflows.PlaneIgnore}
}

// RepoSource is a repository's own definitions (.agent/workflows) read
// through fsys, the repository's jail (workspace.Root.FS): a symbolic
// link anywhere on the way that leaves the repository is refused by the
// jail, not by checks here.
func RepoSource(fsys fs.FS) Source { return Source{Name: RepoDir, FS: fsys, Dir: RepoDir} }

// LoadRepo loads the embedded plane plus repoDir's definitions ("" for
// the embedded plane alone), reading the repository through its jail.
func LoadRepo(reg *schemas.Registry, repoDir string) (*Registry, error) {
	if repoDir == "" {
		return Load(reg, Builtin())
	}
	ws, err := workspace.Open(repoDir, workspace.Options{})
	if err != nil {
		return nil, fmt.Errorf("workflow: repository %q: %w", repoDir, err)
	}
	defer ws.Close()
	return Load(reg, Builtin(), RepoSource(ws.FS()))
}
