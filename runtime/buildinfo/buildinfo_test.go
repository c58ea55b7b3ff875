package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestCompute(t *testing.T) {
	info := func(v string, settings ...string) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			bi := &debug.BuildInfo{Main: debug.Module{Version: v}}
			for i := 0; i+1 < len(settings); i += 2 {
				bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
			}
			return bi, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, c := range []struct {
		stamped string
		read    func() (*debug.BuildInfo, bool)
		want    string
	}{
		{"v1.4.0", info("(devel)"), "v1.4.0"},
		{"dev", info("v1.3.2"), "v1.3.2"},
		{"", info("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "false"), "devel+0123456789ab"},
		{"", info("(devel)", "vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"), "devel+0123456789ab-dirty"},
		{"", info("v0.0.0-20261128-abc+dirty", "vcs.revision", "ffff", "vcs.modified", "true"), "devel+ffff-dirty"},
		{"", info("(devel)"), "devel"},
		{"", none, "devel"},
	} {
		if got := compute(c.stamped, c.read); got != c.want {
			t.Errorf("compute(%q) = %q, want %q", c.stamped, got, c.want)
		}
	}
	if Version() == "" {
		t.Error("Version is empty")
	}
}
