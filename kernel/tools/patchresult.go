package tools

import (
	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/patch"
)

// patchedFile is one file of repo.patch's result: the change as assessed,
// and the SHA-256 of the content the patch left at its path (absent for a
// deletion), as repo.write's result carries the hash of what it wrote.
// The bot commits a session's files only when the worktree still holds
// exactly what the file tools recorded (kernel/worktree/commit.go).
type patchedFile struct {
	kernel.FileChange
	Hash string `json:"hash,omitempty"`
}

// patchedFiles pairs the assessed changes with the written contents;
// changes[i] describes fps[i], whose new content is results[i].
func patchedFiles(fps []patch.File, results [][]byte, changes []kernel.FileChange) []patchedFile {
	out := make([]patchedFile, len(changes))
	for i, c := range changes {
		out[i].FileChange = c
		if i < len(fps) && fps[i].Op != patch.Delete {
			out[i].Hash = Sha256Hex(results[i])
		}
	}
	return out
}
