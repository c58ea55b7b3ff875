package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Nested repositories planted at submodule paths.
//
// A repository may hold gitlinks (submodule entries, mode 160000) with
// nothing checked out at them. A command that writes a .git file or
// directory at such a path (or replaces the path with a symlink to a
// repository it made) turns it into a "submodule" whose configuration the
// command chose: the next host git that looks at submodules — the
// user's own `git status` after `agentos tool call test.run`, or any git
// of agentos's that does not turn submodules off — reads that
// configuration and runs what it names (core.fsmonitor, hooks, filters),
// outside the sandbox. So after every command, under every mechanism,
// what the command planted at a gitlink path is removed and the command
// fails with a GitTamperError. Submodules that were checked out before
// the command are left as they were.

// maxIndex bounds the git index read before and after a command.
const maxIndex = 256 << 20

// gitlinkGuard records the gitlink paths of a worktree's index and which
// of them had a .git before a command.
type gitlinkGuard struct {
	work  string
	links map[string]bool // gitlink path (slash-separated) → had .git or was not a directory before
}

func snapshotGitlinks(work string) (*gitlinkGuard, error) {
	g := &gitlinkGuard{work: work, links: map[string]bool{}}
	paths, err := indexGitlinks(filepath.Join(work, ".git", "index"))
	if err != nil {
		return nil, fmt.Errorf("sandbox: read the git index: %w", err)
	}
	for _, p := range paths {
		g.links[p] = !plainDir(filepath.Join(work, filepath.FromSlash(p)))
	}
	return g, nil
}

// plainDir reports whether p is a real directory without a .git entry.
func plainDir(p string) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return false
	}
	_, err = os.Lstat(filepath.Join(p, ".git"))
	return errors.Is(err, fs.ErrNotExist)
}

// verify removes what the command planted at gitlink paths: those of the
// index before the command and those of the index after it (under
// Landlock a command can rewrite .git/index).
func (g *gitlinkGuard) verify() error {
	after, err := indexGitlinks(filepath.Join(g.work, ".git", "index"))
	if err != nil {
		// The index is unreadable now: check the paths known from before.
		after = nil
	}
	var planted []string
	check := func(rel string, hadBefore bool) error {
		if hadBefore {
			return nil
		}
		p := filepath.Join(g.work, filepath.FromSlash(rel))
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case fi.IsDir():
			gp := filepath.Join(p, ".git")
			if _, err := os.Lstat(gp); errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			planted = append(planted, rel+"/.git")
			return os.RemoveAll(gp)
		default:
			// A symlink (to a repository elsewhere) or a file where the
			// submodule's directory belongs.
			planted = append(planted, rel)
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o755)
		}
	}
	for rel, had := range g.links {
		if err := check(rel, had); err != nil {
			return fmt.Errorf("sandbox: remove what the command planted at submodule path %s: %w", rel, err)
		}
	}
	for _, rel := range after {
		if _, known := g.links[rel]; known {
			continue
		}
		if err := check(rel, false); err != nil {
			return fmt.Errorf("sandbox: remove what the command planted at submodule path %s: %w", rel, err)
		}
	}
	if len(planted) == 0 {
		return nil
	}
	sort.Strings(planted)
	return &GitTamperError{Paths: planted, Nested: true}
}

// indexGitlinks returns the paths of the gitlink entries of a git index
// file (versions 2, 3 and 4). A missing index has none.
func indexGitlinks(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > maxIndex {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxIndex)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return parseGitlinks(b)
}

// parseGitlinks reads the entries of an index (see git's
// Documentation/gitformat-index.txt) and returns the paths whose mode is
// a gitlink. A split index (the "link" extension) is refused: its entries
// live in another file.
func parseGitlinks(b []byte) ([]string, error) {
	if len(b) < 12 || string(b[:4]) != "DIRC" {
		return nil, errors.New("not a git index")
	}
	version := binary.BigEndian.Uint32(b[4:8])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("git index version %d", version)
	}
	n := binary.BigEndian.Uint32(b[8:12])
	off := 12
	var out []string
	var prev string
	for i := uint32(0); i < n; i++ {
		start := off
		// ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each),
		// object id (20), flags (2).
		if off+62 > len(b) {
			return nil, errors.New("git index truncated")
		}
		mode := binary.BigEndian.Uint32(b[off+24 : off+28])
		flags := binary.BigEndian.Uint16(b[off+60 : off+62])
		off += 62
		if flags&0x4000 != 0 { // extended flags (version 3+)
			if version < 3 || off+2 > len(b) {
				return nil, errors.New("git index: bad extended flags")
			}
			off += 2
		}
		var name string
		if version == 4 {
			strip, k := binary.Uvarint(b[off:])
			if k <= 0 || int(strip) > len(prev) {
				return nil, errors.New("git index: bad path prefix")
			}
			off += k
			end := bytes.IndexByte(b[off:], 0)
			if end < 0 {
				return nil, errors.New("git index truncated")
			}
			name = prev[:len(prev)-int(strip)] + string(b[off:off+end])
			off += end + 1
		} else {
			end := bytes.IndexByte(b[off:], 0)
			if end < 0 {
				return nil, errors.New("git index truncated")
			}
			name = string(b[off : off+end])
			off += end + 1
			// Entries are padded with NULs to a multiple of 8 bytes.
			if pad := (off - start) % 8; pad != 0 {
				off += 8 - pad
			}
			if off > len(b) {
				return nil, errors.New("git index truncated")
			}
		}
		prev = name
		if mode&0o170000 == 0o160000 {
			if name == "" || strings.HasPrefix(name, "/") || strings.Contains("/"+name+"/", "/../") {
				return nil, fmt.Errorf("git index: gitlink path %q", name)
			}
			out = append(out, name)
		}
	}
	// Extensions: four-byte signature, four-byte size. Only "link" (a
	// split index) changes which entries exist.
	for off+8 <= len(b)-20 {
		sig := string(b[off : off+4])
		size := int(binary.BigEndian.Uint32(b[off+4 : off+8]))
		if sig == "link" {
			return nil, errors.New("the git index is split (core.splitIndex): run `git update-index --no-split-index` in the repository")
		}
		off += 8 + size
	}
	return out, nil
}
