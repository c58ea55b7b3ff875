package webhook

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestCrashHelper is the server process of TestAcknowledgedSurvivesKill;
// it does nothing in a normal test run.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv("AGENTOS_WEBHOOK_CRASH_DB")
	if path == "" {
		t.Skip("helper process only")
	}
	q, err := OpenQueue(path)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	// Serves until killed; the queue is never closed.
	t.Fatal(http.Serve(ln, newEngine(NewHandler(Config{Secrets: [][]byte{testSecret}}, q, nil))))
}

// TestAcknowledgedSurvivesKill: every delivery answered 202 is in the queue
// after the server process is killed (SIGKILL, no Close) mid-load.
func TestAcknowledgedSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	path := t.TempDir() + "/crash.db"
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "AGENTOS_WEBHOOK_CRASH_DB="+path)
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

	body := []byte(`{"action":"created","comment":{"body":"/agent fix"}}`)
	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ { // until the server is gone
				id := fmt.Sprintf("kill-%d-%d", w, i)
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/webhook", bytes.NewReader(body))
				req.Header.Set(EventHeader, "issue_comment")
				req.Header.Set(DeliveryHeader, id)
				req.Header.Set(SignatureHeader, Sign(testSecret, body))
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
					if n == 300 {
						cmd.Process.Kill() // mid-load: other requests are in flight
					}
				}
			}
		}()
	}
	wg.Wait()
	cmd.Wait()

	q, err := OpenQueue(path)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if len(acked) < 300 {
		t.Fatalf("only %d deliveries acknowledged", len(acked))
	}
	for _, id := range acked {
		if _, ok, err := q.Get(context.Background(), id); err != nil || !ok {
			t.Errorf("acknowledged delivery %s lost (%v)", id, err)
		}
	}
}
