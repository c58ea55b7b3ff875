package worktree

import (
	"os"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// fillStat copies the stat data git compares to decide that a file is
// unchanged without hashing it.
func fillStat(e *index.Entry, fi os.FileInfo) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	e.CreatedAt = time.Unix(st.Ctim.Unix())
	e.Dev = uint32(st.Dev)
	e.Inode = uint32(st.Ino)
	e.UID = st.Uid
	e.GID = st.Gid
}
