//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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

// BenchmarkLauncher measures what one command costs to start under each
// mechanism and launcher: `true` in an empty worktree, unconfined; under
// bwrap run directly by bwrap (the same file system and namespaces, no
// launcher, no bookkeeping: the raw mechanism); under Landlock run by the
// launcher's confine stage alone (one small Go program that applies the
// same limits, ruleset and seccomp filter and execs, with no supervisor:
// the raw mechanism); and through Sandbox.Command (Start, Wait, Finish)
// with the small launcher (agentos-launch) and with the agentos binary
// re-executing itself, under each mechanism; and the small launcher once
// more without the command's cgroups (small-nocg), to tell what joining
// them costs from what the launcher costs, and under Landlock once more
// without the command's network namespace (small-nonet: IP refused, as
// on a host that allows no namespaces), to tell what making one costs
// (the raw Landlock variant makes one too, when commands get one). The
// variants take turns in each iteration, so they share the machine's
// load; each is reported as its median, and the launched ones as the
// difference from their raw mechanism. It builds agentos (cached after the first run), or copies
// the one AGENTOS_BENCH_BINARY names.
//
//	go test -run '^$' -bench Launcher -benchtime 50x ./kernel/sandbox/
//
// (With a count, -benchtime 50x, the table of that one run is printed.)
func BenchmarkLauncher(b *testing.B) {
	smallExe, selfExe := benchBinaries(b)
	work, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	private := b.TempDir()
	for _, d := range []string{"home", "tmp"} {
		if err := os.Mkdir(filepath.Join(private, d), 0o700); err != nil {
			b.Fatal(err)
		}
	}
	cache := b.TempDir()
	argv := []string{"true"}
	// cpu is the CPU time of the process tree: the started process and
	// every descendant it waited for (bwrap, the launcher stages and the
	// command all reap theirs), which the machine's load does not
	// inflate as it does the wall time.
	cpu := func(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }
	run := func(c *sandbox.Cmd, err error) (time.Duration, error) {
		if err != nil {
			return 0, err
		}
		if err := c.Start(); err != nil {
			return 0, err
		}
		werr := c.Wait()
		if ferr := c.Finish(); werr == nil {
			werr = ferr
		}
		return cpu(c.ProcessState), werr
	}
	type variant struct {
		name string
		run  func() (time.Duration, error)
	}
	none := sandbox.Disabled()
	vs := []variant{{"none", func() (time.Duration, error) {
		return run(none.Command(context.Background(), sandbox.Request{Argv: argv, Work: work, Dir: work}))
	}}}
	var missing []string
	for _, mode := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeLandlock} {
		detect := func(exe string) *sandbox.Sandbox {
			return sandbox.DetectBeside(context.Background(), sandbox.Config{Mode: mode, CacheDir: cache}, exe)
		}
		small := detect(smallExe)
		if small.Err() != nil {
			missing = append(missing, fmt.Sprintf("%s: %v", mode, small.Err()))
			continue
		}
		if k := small.Report().LauncherKind; k != sandbox.LauncherSmall {
			b.Fatalf("%s: launcher %s, want the small one", mode, k)
		}
		smallNoCgroups := small.WithoutCgroups()
		vs = append(vs,
			variant{string(mode) + "-raw", func() (time.Duration, error) {
				c, err := small.RawCommand(work, private, argv)
				if err != nil {
					return 0, err
				}
				err = c.Run()
				return cpu(c.ProcessState), err
			}},
			variant{string(mode) + "-small", func() (time.Duration, error) {
				return run(small.Command(context.Background(), sandbox.Request{Argv: argv, Work: work, Dir: work}))
			}},
			variant{string(mode) + "-small-nocg", func() (time.Duration, error) {
				return run(smallNoCgroups.Command(context.Background(), sandbox.Request{Argv: argv, Work: work, Dir: work}))
			}},
		)
		if mode == sandbox.ModeLandlock && small.Report().Loopback == "private" {
			// What the command's network namespace costs.
			noNet := small.WithoutNetns()
			vs = append(vs, variant{string(mode) + "-small-nonet", func() (time.Duration, error) {
				return run(noNet.Command(context.Background(), sandbox.Request{Argv: argv, Work: work, Dir: work}))
			}})
		}
		if selfExe == "" {
			continue
		}
		self := detect(selfExe)
		if self.Err() != nil {
			missing = append(missing, fmt.Sprintf("%s with agentos as the launcher: %v", mode, self.Err()))
			continue
		}
		if k := self.Report().LauncherKind; k != sandbox.LauncherSelf {
			b.Fatalf("%s: launcher %s, want agentos itself", mode, k)
		}
		vs = append(vs, variant{string(mode) + "-self", func() (time.Duration, error) {
			return run(self.Command(context.Background(), sandbox.Request{Argv: argv, Work: work, Dir: work}))
		}})
	}
	if selfExe == "" {
		missing = append(missing, "agentos as the launcher: "+benchBins.selfErr)
	}
	if len(missing) > 0 {
		b.Logf("not measured: %s", strings.Join(missing, "; "))
	}
	for _, v := range vs {
		if _, err := v.run(); err != nil {
			b.Fatalf("%s: %v", v.name, err)
		}
	}
	// Run order: bwrap and Landlock alternate. The kernel tears a
	// network namespace down after bwrap has exited, and the next bwrap
	// waits for that while it makes its own: a bwrap variant right after
	// another pays for its predecessor, one after "none" does not.
	order := make([]variant, 0, len(vs))
	var bw, ll []variant
	for _, v := range vs {
		switch {
		case strings.HasPrefix(v.name, string(sandbox.ModeBwrap)):
			bw = append(bw, v)
		case strings.HasPrefix(v.name, string(sandbox.ModeLandlock)):
			ll = append(ll, v)
		default:
			order = append(order, v)
		}
	}
	for i := 0; i < max(len(bw), len(ll)); i++ {
		if i < len(bw) {
			order = append(order, bw[i])
		}
		if i < len(ll) {
			order = append(order, ll[i])
		}
	}
	wall, cpus := map[string][]time.Duration{}, map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, v := range order {
			// A pause first, as between an agent's commands: joining a
			// cgroup waits for an RCU grace period unless another
			// migration has just done so (cgroup v1, and v2 without
			// favordynmods), and the previous bwrap's network namespace
			// is torn down after it exits; back to back, a variant
			// would ride on its predecessor.
			b.StopTimer()
			time.Sleep(40 * time.Millisecond)
			b.StartTimer()
			start := time.Now()
			c, err := v.run()
			if err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			wall[v.name] = append(wall[v.name], time.Since(start))
			cpus[v.name] = append(cpus[v.name], c)
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var table strings.Builder
	for _, v := range vs {
		w, c := median(wall[v.name]), median(cpus[v.name])
		b.ReportMetric(ms(w), v.name+"-ms")
		if v.name == "none" {
			// In the header: go test keeps ten lines of a
			// benchmark's log.
			fmt.Fprintf(&table, "%-20s %8s %10s %8s %10s (ms, medians of %d runs of true; unconfined %.2f wall, %.2f cpu)\n", "variant", "wall", "minus raw", "cpu", "minus raw", b.N, ms(w), ms(c))
			continue
		}
		fmt.Fprintf(&table, "%-20s %8.2f", v.name, ms(w))
		mech, kind, _ := strings.Cut(v.name, "-")
		if kind != "" && kind != "raw" {
			extra := w - median(wall[mech+"-raw"])
			b.ReportMetric(ms(extra), v.name+"-over-raw-ms")
			fmt.Fprintf(&table, " %+10.2f %8.2f %+10.2f\n", ms(extra), ms(c), ms(c-median(cpus[mech+"-raw"])))
		} else {
			fmt.Fprintf(&table, " %10s %8.2f\n", "", ms(c))
		}
	}
	if b.N > 1 {
		// The table of the sizing run (N=1) would take the room of
		// the real one.
		b.Log(strings.TrimSuffix(table.String(), "\n"))
	}
}

// benchBins are the binaries BenchmarkLauncher builds once per test
// binary (a benchmark function runs several times).
var benchBins struct {
	once              sync.Once
	small, self       string
	smallErr, selfErr string
}

// benchBins returns a stand-in agentos path with agentos-launch next to it,
// and the path of a real agentos binary with no launcher next to it ("" when
// agentos does not build: the tree is someone's work in progress).
func benchBinaries(b *testing.B) (small, self string) {
	b.Helper()
	dir := sharedDir(b)
	benchBins.once.Do(func() {
		sd, od := filepath.Join(dir, "bench-small"), filepath.Join(dir, "bench-self")
		for _, d := range []string{sd, od} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				benchBins.smallErr = err.Error()
				return
			}
		}
		if err := goBuild("github.com/agentos/agentos/cmd/agentos-launch", filepath.Join(sd, sandbox.LauncherName)); err != nil {
			benchBins.smallErr = err.Error()
			return
		}
		benchBins.small = filepath.Join(sd, "agentos")
		if prebuilt := os.Getenv("AGENTOS_BENCH_BINARY"); prebuilt != "" {
			// An agentos built elsewhere (the tree may not build while
			// someone works in it): copied, so that no launcher lies
			// next to it.
			b, err := os.ReadFile(prebuilt)
			if err == nil {
				err = os.WriteFile(filepath.Join(od, "agentos"), b, 0o755)
			}
			if err != nil {
				benchBins.selfErr = err.Error()
				return
			}
		} else if err := goBuild("github.com/agentos/agentos/cmd/agentos", filepath.Join(od, "agentos")); err != nil {
			benchBins.selfErr = err.Error() + " (AGENTOS_BENCH_BINARY names an agentos built elsewhere)"
			return
		}
		benchBins.self = filepath.Join(od, "agentos")
	})
	if benchBins.small == "" {
		b.Fatal(benchBins.smallErr)
	}
	return benchBins.small, benchBins.self
}
