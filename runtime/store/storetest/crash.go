package storetest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// CrashChildEnv, when set to a directory, makes TestHelperProcess run the
// crash child instead of a test.
const CrashChildEnv = "AGENTOS_CRASH_CHILD_DIR"

// CrashChild appends forever to four sessions from four goroutines and
// prints "session seq" after each acknowledged append. It never returns.
func CrashChild(open func(dir string) (store.Store, error)) {
	dir := os.Getenv(CrashChildEnv)
	s, err := open(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(3)
	}
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(sid string) {
			defer wg.Done()
			evs, _ := s.Read(ctx, sid, 1)
			seq := int64(len(evs))
			for {
				got, err := s.Append(ctx, sid, seq, msg(strings.Repeat("x", 50+int(seq%200))))
				if err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(4)
				}
				seq = got[len(got)-1].Seq
				mu.Lock()
				fmt.Fprintf(out, "%s %d\n", sid, seq)
				out.Flush()
				mu.Unlock()
			}
		}(fmt.Sprintf("crash-%d", g))
	}
	wg.Wait()
	os.Exit(0)
}

// Crash runs trials: start a child appending, SIGKILL it at a random
// moment, reopen the store and check that it holds a valid prefix with
// every acknowledged append, no torn or duplicated event, chain intact.
func Crash(t *testing.T, trials int, open func(dir string) (store.Store, error)) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	acked := map[string]int64{}
	for trial := 0; trial < trials; trial++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), CrashChildEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1<<16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// Let it get going, then kill it mid-stream.
		first, ok := <-lines
		if !ok {
			cmd.Wait()
			t.Fatalf("trial %d: child produced nothing: %s", trial, stderr.String())
		}
		time.Sleep(time.Duration(rng.Intn(40)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		record := func(l string) {
			f := strings.Fields(l)
			if len(f) != 2 {
				return // a line cut by the kill was never acknowledged to us
			}
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil && n > acked[f[0]] {
				acked[f[0]] = n
			}
		}
		record(first)
		for l := range lines {
			record(l)
		}
		s, err := open(dir)
		if err != nil {
			t.Fatalf("trial %d: reopen: %v", trial, err)
		}
		ctx := context.Background()
		for sid, n := range acked {
			evs, err := s.Read(ctx, sid, 1)
			if err != nil {
				t.Fatalf("trial %d: read %s: %v", trial, sid, err)
			}
			if int64(len(evs)) < n {
				t.Fatalf("trial %d: session %s has %d events, but %d were acknowledged", trial, sid, len(evs), n)
			}
			if rep := replay.VerifyEvents(schemas.MustDefault(), evs); !rep.Valid {
				t.Fatalf("trial %d: session %s: %v", trial, sid, rep.Problem)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(acked) == 0 {
		t.Fatal("no appends were acknowledged in any trial")
	}
	t.Logf("%d trials; acknowledged events per session at the end: %v", trials, acked)
}
