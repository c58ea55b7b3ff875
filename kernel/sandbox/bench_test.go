package sandbox_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/kernel/workspace"
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

// BenchmarkDenyMask measures what hiding the deny patterns' files from
// commands costs each command: `true` under bwrap in a worktree of 20,000
// files in 400 directories with one .env, once with the default policy's
// deny patterns (the worktree is walked for matches, the match is
// covered) and once without (the baseline), alternately in the same run.
// The metrics are the medians and their ratio, and the walk alone.
//
//	go test -run '^$' -bench DenyMask -benchtime 30x ./kernel/sandbox/
func BenchmarkDenyMask(b *testing.B) {
	s := detect(b, sandbox.ModeBwrap)
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for d := range 400 {
		for f := range 50 {
			write(b, filepath.Join(dir, fmt.Sprintf("pkg%03d", d), fmt.Sprintf("f%02d.go", f)), "package p\n")
		}
	}
	write(b, filepath.Join(dir, "svc", ".env"), "TOKEN=x\n")
	deny := []string{"**/.git/**", ".agent/sessions/**", "**/.env", "**/.env.local"}
	masked, err := workspace.Open(dir, workspace.Options{Sandbox: s, DenyPatterns: deny})
	if err != nil {
		b.Fatal(err)
	}
	defer masked.Close()
	plain, err := workspace.Open(dir, workspace.Options{Sandbox: s})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	if m := masked.Masked(); len(m) != 1 {
		b.Fatalf("masked %v, want the one .env", m)
	}
	run := func(ws *workspace.Root) time.Duration {
		start := time.Now()
		res, err := ws.Run(context.Background(), workspace.RunSpec{Argv: []string{"true"}, Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("true: %v %s", err, res.Stderr)
		}
		return time.Since(start)
	}
	var withMask, without, walk []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		without = append(without, run(plain))
		withMask = append(withMask, run(masked))
		start := time.Now()
		masked.Masked()
		walk = append(walk, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(without).Microseconds())/1000, "baseline-ms")
	b.ReportMetric(float64(median(withMask).Microseconds())/1000, "masked-ms")
	b.ReportMetric(float64(median(withMask))/float64(median(without)), "masked/baseline")
	b.ReportMetric(float64(median(walk).Microseconds())/1000, "walk-ms")
}
