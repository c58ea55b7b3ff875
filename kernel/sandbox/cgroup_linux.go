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

// tryCgroup creates and removes a child of dir with a pids limit.
func tryCgroup(dir string) error {
	c, err := newCgroup(dir, 8)
	if err != nil {
		return err
	}
	return removeCgroup(c)
}

func newCgroup(parent string, max uint64) (string, error) {
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
	if err := launch.WriteExisting(filepath.Join(dir, "pids.max"), strconv.FormatUint(max, 10)); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("pids.max: %w", err)
	}
	return dir, nil
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
