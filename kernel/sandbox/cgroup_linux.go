//go:build linux

package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentos/agentos/kernel/sandbox/internal/launch"
	"golang.org/x/sys/unix"
)

// cgroupSlack covers the launcher's own threads and bwrap's processes.
const cgroupSlack = 32

// findPidsCgroup returns a directory in which this process can create a
// child cgroup with a pids controller: cgroup v1's pids hierarchy, or a
// cgroup v2 directory whose subtree has the pids controller enabled.
func findPidsCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var v1, v2 []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = append(v2, filepath.Join("/sys/fs/cgroup", parts[2]), filepath.Join("/sys/fs/cgroup/unified", parts[2]))
		case hasField(parts[1], "pids"):
			v1 = append(v1, filepath.Join("/sys/fs/cgroup/pids", parts[2]), filepath.Join("/sys/fs/cgroup", parts[1], parts[2]))
		}
	}
	cands := append(v1, v2...)
	var last error = errors.New("no pids cgroup controller")
	for _, dir := range cands {
		if err := tryCgroup(dir); err != nil {
			last = err
			continue
		}
		return dir, nil
	}
	return "", last
}

func hasField(list, name string) bool {
	for _, f := range strings.Split(list, ",") {
		if f == name {
			return true
		}
	}
	return false
}

// findMemoryCgroup returns a directory in which this process can create a
// child cgroup with a memory limit: cgroup v1's memory hierarchy, or a
// cgroup v2 directory whose subtree has the memory controller enabled.
func findMemoryCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var cands []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			cands = append(cands, filepath.Join("/sys/fs/cgroup", parts[2]), filepath.Join("/sys/fs/cgroup/unified", parts[2]))
		case hasField(parts[1], "memory"):
			cands = append([]string{filepath.Join("/sys/fs/cgroup/memory", parts[2]), filepath.Join("/sys/fs/cgroup", parts[1], parts[2])}, cands...)
		}
	}
	var last error = errors.New("no memory cgroup controller")
	for _, dir := range cands {
		c, err := newMemCgroup(dir, 64<<20)
		if err != nil {
			last = err
			continue
		}
		if err := removeCgroup(c); err != nil {
			last = err
			continue
		}
		return dir, nil
	}
	return "", last
}

// memLimitFiles are the control files of a memory limit, cgroup v2's and
// v1's; the first of each pair that exists is written. Swap is limited to
// nothing (v2) or to the same total (v1), or a tree could swap past it.
var memLimitFiles = [][2]string{{"memory.max", "memory.limit_in_bytes"}, {"memory.swap.max", "memory.memsw.limit_in_bytes"}}

// limitMemory sets the memory limit of an existing cgroup directory.
func limitMemory(dir string, bytes uint64) error {
	v := strconv.FormatUint(bytes, 10)
	for i, pair := range memLimitFiles {
		val := v
		if i == 1 && exists(filepath.Join(dir, pair[0])) {
			val = "0"
		}
		f := ""
		for _, name := range pair {
			if exists(filepath.Join(dir, name)) {
				f = filepath.Join(dir, name)
				break
			}
		}
		if f == "" {
			if i == 0 {
				return fmt.Errorf("%s has no memory controller", dir)
			}
			continue // no swap accounting: nothing to limit
		}
		if err := launch.WriteExisting(f, val); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
	}
	return nil
}

func newMemCgroup(parent string, bytes uint64) (string, error) {
	dir, err := makeCgroup(parent)
	if err != nil {
		return "", err
	}
	if err := limitMemory(dir, bytes); err != nil {
		os.Remove(dir)
		return "", err
	}
	return dir, nil
}

// tryCgroup creates and removes a child of dir with a pids limit.
func tryCgroup(dir string) error {
	c, err := newCgroup(dir, 8)
	if err != nil {
		return err
	}
	return removeCgroup(c)
}

func newCgroup(parent string, max uint64) (string, error) {
	dir, err := makeCgroup(parent)
	if err != nil {
		return "", err
	}
	if err := launch.WriteExisting(filepath.Join(dir, "pids.max"), strconv.FormatUint(max, 10)); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("pids.max: %w", err)
	}
	return dir, nil
}

// makeCgroup creates a child cgroup of parent with a random name.
func makeCgroup(parent string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(parent, &st); err != nil {
		return "", err
	}
	if st.Type != unix.CGROUP_SUPER_MAGIC && st.Type != unix.CGROUP2_SUPER_MAGIC {
		return "", fmt.Errorf("%s is not a cgroup file system", parent)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, "agentos-sandbox-"+hex.EncodeToString(b[:]))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// commandCgroups makes the cgroups one command joins — the pids cgroup
// and the memory cgroup, one directory where both controllers share a
// hierarchy — and registers their removal; the first is the one whose
// processes are the command's tree.
func (s *Sandbox) commandCgroups(l Limits, cl *cleanup) ([]string, error) {
	var dirs []string
	if s.pids.kind == pidsCgroup {
		cg, err := newCgroup(s.pids.parent, l.Processes+cgroupSlack)
		if err != nil {
			return nil, fmt.Errorf("sandbox: process cgroup: %w", err)
		}
		cl.add(func() error { return removeCgroup(cg) })
		dirs = append(dirs, cg)
		if s.memWithPids {
			if err := limitMemory(cg, l.Memory); err != nil {
				return nil, fmt.Errorf("sandbox: memory cgroup: %w", err)
			}
			return dirs, nil
		}
	}
	if s.memCgroup != "" {
		cg, err := newMemCgroup(s.memCgroup, l.Memory)
		if err != nil {
			return nil, fmt.Errorf("sandbox: memory cgroup: %w", err)
		}
		cl.add(func() error { return removeCgroup(cg) })
		dirs = append(dirs, cg)
	}
	return dirs, nil
}

// decideMemory finds where commands' memory cgroups are made.
func (s *Sandbox) decideMemory() {
	s.memCgroup, s.memWithPids, s.memWhy = "", false, ""
	dir, err := findMemoryCgroup()
	if err != nil {
		s.memWhy = "no writable memory cgroup (" + err.Error() + "); give agentos a delegated cgroup to limit it"
		return
	}
	s.memCgroup = dir
	s.memWithPids = s.pids.kind == pidsCgroup && s.pids.parent == dir
}

// removeCgroup kills what is left in the cgroup and removes it.
func removeCgroup(dir string) error {
	var err error
	for i := 0; i < 100; i++ {
		pids := launch.CgroupPids(dir, -1)
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
		if err = os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(time.Duration(min(i+1, 20)) * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}
