package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestViewServesARecordedSession runs `agentos view` on a recorded log and
// reads its page over HTTP: the session, its four lanes, read-only.
func TestViewServesARecordedSession(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- cmdView(ctx, []string{"../../testdata/sessions/approval.events.jsonl"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no output: %v (%v)", err, <-done)
	}
	go io.Copy(io.Discard, pr)
	url := regexp.MustCompile(`http://\S+`).FindString(line)
	if url == "" || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("view printed %q, want a loopback URL", line)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "recorded-approval") || !strings.Contains(page, "read-only replay") {
		t.Fatalf("GET %s = %d:\n%.500s", url, resp.StatusCode, page)
	}
	for _, lane := range []string{">lead<", ">planner<", ">worker<", ">reviewer<"} {
		if !strings.Contains(page, lane) {
			t.Errorf("the page has no %s lane", lane)
		}
	}
	if strings.Contains(page, `value="approve"`) || strings.Contains(page, "Sign in with GitHub") {
		t.Error("a read-only replay offers answers or sign-in")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("view ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("view did not stop")
	}
}

func TestViewRefusesNonLoopbackAndBadLogs(t *testing.T) {
	ctx := context.Background()
	err := cmdView(ctx, []string{"../../testdata/sessions/approval.events.jsonl", "--addr", "0.0.0.0:0"}, io.Discard, io.Discard)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("--addr 0.0.0.0:0: %v, want a usage error naming loopback", err)
	}
	bad := writeFile(t, t.TempDir(), "events.jsonl", "{\"not\":\"an event\"}\n")
	if err := cmdView(ctx, []string{bad}, io.Discard, io.Discard); err == nil {
		t.Error("a log that does not verify was served")
	}
}
