//go:build linux

package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// JoinCgroup moves this process into dir ("" = none).
func JoinCgroup(dir string) error {
	if dir == "" {
		return nil
	}
	if err := WriteExisting(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
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
