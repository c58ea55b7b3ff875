package sandbox_test

import (
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
)

// BenchmarkSandboxOverhead measures what the sandbox adds to one command:
// `true`, and `go test` of the sample module (warm build cache). Each
// iteration runs the command unconfined, under bwrap and under landlock in
// turn, through the workspace's process runner, so the three are measured
// in the same run under the same machine load; the metrics are the median
// wall time of each and the ratios of the medians to the unconfined one.
//
//	go test -run '^$' -bench SandboxOverhead -benchtime 15x ./kernel/sandbox/
func BenchmarkSandboxOverhead(b *testing.B) {
	testenv.LookPath(b, "go")
	goDir, _ := prepareSamples(b)
	// Unconfined, the sample finds its dependency where the sandbox finds
	// it: in the shared module cache, with no network.
	b.Setenv("GOMODCACHE", filepath.Join(sharedDir(b), "modcache"))
	b.Setenv("GOPROXY", "off")
	b.Setenv("GOFLAGS", "")
	modes := []sandbox.Mode{sandbox.ModeNone, sandbox.ModeBwrap, sandbox.ModeLandlock}
	sbx := map[sandbox.Mode]*sandbox.Sandbox{sandbox.ModeNone: sandbox.Disabled()}
	for _, m := range modes[1:] {
		sbx[m] = detect(b, m)
	}
	for _, c := range []struct {
		name string
		dir  string
		argv []string
	}{
		{"true", b.TempDir(), []string{"true"}},
		{"go-test", goDir, []string{"go", "test", "-count=1", "./..."}},
	} {
		b.Run(c.name, func(b *testing.B) {
			// Warm up: the first go test of a worktree fills its private
			// build cache.
			for _, m := range modes {
				if res, err := runIn(b, sbx[m], c.dir, nil, c.argv...); err != nil || res.ExitCode != 0 {
					b.Fatalf("%s %v: %v %s%s", m, c.argv, err, res.Stdout, res.Stderr)
				}
			}
			durs := map[sandbox.Mode][]time.Duration{}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, m := range modes {
					start := time.Now()
					res, err := runIn(b, sbx[m], c.dir, nil, c.argv...)
					durs[m] = append(durs[m], time.Since(start))
					if err != nil || res.ExitCode != 0 {
						b.Fatalf("%s %v: %v %s%s", m, c.argv, err, res.Stdout, res.Stderr)
					}
				}
			}
			b.StopTimer()
			base := median(durs[sandbox.ModeNone])
			for _, m := range modes {
				med := median(durs[m])
				b.ReportMetric(float64(med.Microseconds())/1000, string(m)+"-ms")
				if m != sandbox.ModeNone && base > 0 {
					b.ReportMetric(float64(med)/float64(base), string(m)+"/none")
				}
			}
		})
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
