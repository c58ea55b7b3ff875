package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
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

// TestViewRefusesAForeignHost: agentos view serves without sign-in, so a
// web page that points its own name at 127.0.0.1 (DNS rebinding) must not
// read the session through it: every route, the page and the API alike,
// answers only to the address it listens on, localhost, 127.0.0.1 and
// [::1] on its port; any other Host gets 421.
func TestViewRefusesAForeignHost(t *testing.T) {
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
	page := regexp.MustCompile(`http://\S+`).FindString(line)
	u, err := url.Parse(page)
	if err != nil || u.Port() == "" {
		t.Fatalf("view printed %q", line)
	}
	get := func(path, host string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+u.Host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	events := strings.Replace(u.Path, "/runs/", "/v1/runs/", 1)
	for _, host := range []string{u.Host, "localhost:" + u.Port(), "127.0.0.1:" + u.Port(), "[::1]:" + u.Port()} {
		for _, path := range []string{u.Path, events} {
			if code, body := get(path, host); code != http.StatusOK || !strings.Contains(body, "recorded-approval") {
				t.Errorf("GET %s with Host %s: %d %.200s, want 200 and the session", path, host, code, body)
			}
		}
	}
	for _, host := range []string{"rebind.example:" + u.Port(), "rebind.example", "localhost:1", "127.0.0.1"} {
		for _, path := range []string{u.Path, events, events + "/events", "/v1/runs", "/runs"} {
			code, body := get(path, host)
			if code != http.StatusMisdirectedRequest || strings.Contains(body, "recorded-approval") {
				t.Errorf("GET %s with Host %s: %d %.200s, want 421 and nothing of the session", path, host, code, body)
			}
		}
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
