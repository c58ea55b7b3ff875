package worker

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"

	"github.com/agentos/agentos/bot/webhook"
)

// TestLogCrashHelper is the server process of TestLogAcknowledgedSurvivesKill;
// it does nothing in a normal test run. It also runs a Processor, so that
// claim and completion records are appended between the enqueues.
func TestLogCrashHelper(t *testing.T) {
	dir := os.Getenv("AGENTOS_WEBHOOK_LOG_CRASH_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	q, err := queue.OpenLogQueueOptions(dir, queue.LogOptions{SegmentSize: 256 << 10}) // small segments: rotations under load
	if err != nil {
		t.Fatal(err)
	}
	p := &Processor{Events: testEvents, Queue: q, Dispatch: &fakeDispatcher{}, BotLogin: "agentos[bot]", PollInterval: 10 * time.Millisecond}
	go p.Run(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	// Serves until killed; the queue is never closed.
	t.Fatal(http.Serve(ln, newEngine(webhook.NewHandler(webhook.Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil))))
}

// TestLogAcknowledgedSurvivesKill: every delivery answered 202 by a server
// on the log queue is in the queue after the process is killed (SIGKILL,
// no Close) mid-load, with its body, and the reopened log is whole.
func TestLogAcknowledgedSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLogCrashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "AGENTOS_WEBHOOK_LOG_CRASH_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			addr = a
			break
		}
	}
	if addr == "" {
		t.Fatal("helper did not start")
	}
	go func() {
		for sc.Scan() {
		}
	}()

	bodyOf := func(id string) []byte {
		return []byte(`{"action":"created","comment":{"body":"/agent fix ` + id + `"},"pad":"` + strings.Repeat("x", 4000) + `"}`)
	}
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ { // until the server is gone
				id := fmt.Sprintf("kill-%d-%d", w, i)
				body := bodyOf(id)
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/webhook", bytes.NewReader(body))
				req.Header.Set(webhook.EventHeader, "issue_comment")
				req.Header.Set(webhook.DeliveryHeader, id)
				req.Header.Set(webhook.SignatureHeader, webhook.Sign(testSecret, body))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the server is gone
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					mu.Lock()
					acked = append(acked, id)
					n := len(acked)
					mu.Unlock()
					if n == 500 {
						cmd.Process.Kill() // mid-load: other requests are in flight
					}
				}
			}
		}()
	}
	wg.Wait()
	cmd.Wait()

	q, err := queue.OpenLogQueue(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if len(acked) < 500 {
		t.Fatalf("only %d deliveries acknowledged", len(acked))
	}
	for _, id := range acked {
		r, ok, err := q.Get(context.Background(), id)
		if err != nil || !ok {
			t.Errorf("acknowledged delivery %s lost (%v)", id, err)
		} else if !bytes.Equal(r.Body, bodyOf(id)) {
			t.Errorf("delivery %s: body differs", id)
		}
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.log")); len(segs) < 2 {
		t.Error("no segment rotation happened under load")
	}
}
