//go:build linux

package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OpenJoinFile opens the control file through which the launcher joins
// the cgroup dir by writing "0": cgroup v1's tasks, which moves only the
// writing thread, else cgroup.procs, which moves the whole process.
// Moving a whole process takes a global lock whose write side waits for
// an RCU grace period (about 10 ms on a small VM) unless another
// migration has just done so; moving the calling thread alone does not
// take it. Either way the process the thread starts next is born in the
// cgroup, which is what counts: the launcher writes from the OS thread
// that then starts the command or the next stage (runtime.LockOSThread).
// Where tasks cannot be opened for writing (cgroup v2, or a delegation
// that chowned cgroup.procs only), cgroup.procs is opened.
func OpenJoinFile(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
	if err == nil {
		return f, nil
	}
	return os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
}

// JoinCgroup moves the calling thread (cgroup v1) or this process into
// dir ("" = none); see OpenJoinFile. The caller holds its OS thread until
// it has started the process that belongs in the cgroup.
func JoinCgroup(dir string) error {
	if dir == "" {
		return nil
	}
	f, err := OpenJoinFile(dir)
	if err == nil {
		_, err = f.WriteString("0")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("join the process cgroup: %w", err)
	}
	return nil
}

// CgroupPids lists the cgroup's processes except skip.
func CgroupPids(dir string, skip int) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil && p != skip {
			out = append(out, p)
		}
	}
	return out
}

// WriteExisting writes a cgroup control file, which must exist.
func WriteExisting(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
