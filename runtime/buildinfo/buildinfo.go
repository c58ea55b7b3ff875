// Package buildinfo says which agentos wrote something: the version a
// release build stamps in, else what the Go toolchain recorded (a module
// version for `go install …@v1.2.3`, the VCS revision for a build from a
// checkout), so that every session log names the code that wrote it.
package buildinfo

import (
	"runtime/debug"
	"strings"
	"sync"
)

// stamped is set at link time by release builds:
// -ldflags "-X github.com/agentos/agentos/runtime/buildinfo.stamped=v1.2.3".
var stamped string

var (
	once sync.Once
	ver  string
)

// Version is this binary's version: the stamped one; else the module
// version the toolchain recorded; else "devel+<revision>" (with
// "-dirty" for uncommitted changes) from a checkout; else "devel".
func Version() string {
	once.Do(func() { ver = compute(stamped, debug.ReadBuildInfo) })
	return ver
}

func compute(stamped string, read func() (*debug.BuildInfo, bool)) string {
	if v := strings.TrimSpace(stamped); v != "" && v != "dev" {
		return v
	}
	bi, ok := read()
	if !ok {
		return "devel"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" && !strings.Contains(v, "+dirty") {
		return v
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return "devel"
	}
	return "devel+" + rev + dirty
}
