package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkReadNewlines: repo.read of a 20 MiB file of newlines, the
// whole file and a range, and of a 15 MiB one (under the 16 MiB that is
// read to the end for sha256 and total_lines). Reports bytes allocated per read and the process's
// peak RSS (VmHWM) in MB; run each alone, in a fresh process:
//
//	go test -run '^$' -bench 'ReadNewlines/whole' -benchtime 5x ./kernel/tools/
func BenchmarkReadNewlines(b *testing.B) {
	tl, dir := tree(b, nil)
	if err := os.WriteFile(filepath.Join(dir, "big.txt"), []byte(strings.Repeat("\n", 20<<20)), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mid.txt"), []byte(strings.Repeat("\n", 15<<20)), 0o644); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	d := tl.read()
	for _, c := range []struct{ name, args string }{
		{"whole", `{"path":"big.txt"}`},
		{"range", `{"path":"big.txt","range":[100,200]}`},
		{"whole15MB", `{"path":"mid.txt"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := d.Handler(context.Background(), env, json.RawMessage(c.args)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(peakRSSMB(), "peak-RSS-MB")
		})
	}
}

// peakRSSMB is the process's peak resident set (VmHWM), in MB; 0 where
// /proc is not readable.
func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
