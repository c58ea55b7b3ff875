//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// findLauncher picks the launcher for the executable exe: the small
// launcher next to it when that file is trustworthy, else exe itself.
// note says why a small launcher that is there was not taken.
func findLauncher(exe string) (path string, kind LauncherKind, note string) {
	cand := filepath.Join(filepath.Dir(exe), LauncherName)
	if _, err := os.Lstat(cand); errors.Is(err, fs.ErrNotExist) {
		return exe, LauncherSelf, ""
	}
	if err := checkLauncher(cand); err != nil {
		return exe, LauncherSelf, fmt.Sprintf("%s is not used: %v", cand, err)
	}
	return cand, LauncherSmall, ""
}

// checkLauncher checks that only root or this user can change what path
// runs: the file (after every symbolic link) is a regular, executable
// file that root or this user owns and nobody else may write, and every
// directory an entry of the path is looked up in is owned by root or
// this user and writable by nobody else (or sticky, like /tmp, where
// others cannot rename or remove what they do not own). Whoever could
// replace the launcher would run code outside the sandbox, with the
// bot's reach, at the next command.
func checkLauncher(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s is not an absolute path", path)
	}
	uid := uint32(os.Geteuid())
	owned := func(p string, fi fs.FileInfo) error {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner", p)
		}
		if st.Uid != 0 && st.Uid != uid {
			return fmt.Errorf("%s is owned by uid %d (want root or uid %d)", p, st.Uid, uid)
		}
		return nil
	}
	p := filepath.Clean(path)
	for links := 0; ; {
		// Walk p from the root: each directory must be trusted before
		// one of its entries is, and a symbolic link restarts the walk
		// at its target (its own owner does not matter: a link cannot
		// be changed, only replaced by whoever may write its directory).
		parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
		dir := "/"
		restarted := false
		for i, name := range parts {
			fi, err := os.Lstat(dir)
			if err != nil {
				return err
			}
			if err := owned(dir, fi); err != nil {
				return err
			}
			if fi.Mode()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
				return fmt.Errorf("the directory %s is writable by group or others", dir)
			}
			next := filepath.Join(dir, name)
			fi, err = os.Lstat(next)
			if err != nil {
				return err
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				if links++; links > 40 {
					return fmt.Errorf("%s: too many symbolic links", path)
				}
				target, err := os.Readlink(next)
				if err != nil {
					return err
				}
				if !filepath.IsAbs(target) {
					target = filepath.Join(dir, target)
				}
				p = filepath.Join(append([]string{target}, parts[i+1:]...)...)
				restarted = true
				break
			}
			if i < len(parts)-1 {
				if !fi.IsDir() {
					return fmt.Errorf("%s is not a directory", next)
				}
				dir = next
				continue
			}
			switch {
			case !fi.Mode().IsRegular():
				return fmt.Errorf("%s is not a regular file", next)
			case fi.Mode()&0o022 != 0:
				return fmt.Errorf("%s is writable by group or others", next)
			case fi.Mode()&0o111 == 0:
				return fmt.Errorf("%s is not executable", next)
			}
			return owned(next, fi)
		}
		if !restarted {
			return fmt.Errorf("%s: empty path", path)
		}
	}
}
