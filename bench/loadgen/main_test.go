package main

import (
	"os"
	"strings"
	"testing"
)

func TestTargetOnlyLoopback(t *testing.T) {
	cases := []struct {
		in string
		ok bool
	}{
		{"ours=http://127.0.0.1:18091/webhook@123", true},
		{"v6=http://[::1]:18091/webhook@123", true},
		{"remote=http://10.0.0.1:80/webhook@123", false},
		{"name=http://localhost:80/webhook@123", false}, // names can resolve anywhere
		{"public=http://example.com/webhook@123", false},
		{"tls=https://127.0.0.1:443/webhook@123", false},
		{"nopid=http://127.0.0.1:18091/webhook", false},
		{"badpid=http://127.0.0.1:18091/webhook@x", false},
		{"http://127.0.0.1:18091/webhook@1", false},
	}
	for _, tc := range cases {
		var l targetList
		err := l.Set(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("Set(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func TestCPUTimeOfSelf(t *testing.T) {
	a, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 50_000_000 {
		x += i % 7
	}
	b, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if b < a || x == 0 {
		t.Errorf("CPU time went from %v to %v", a, b)
	}
	if _, err := cpuTime(-1); err == nil {
		t.Error("cpuTime(-1) succeeded")
	}
}

func TestLoadBodies(t *testing.T) {
	path := webhookExamples()
	if _, err := os.Stat(path); err != nil {
		msg := "npm corpus @octokit/webhooks-examples is missing (" + path + "): run `bash .ci/npm-deps.sh` (or set AGENTOS_NPM_DIR)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING: " + msg)
	}
	bodies, err := loadBodies(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		if !strings.Contains(string(b), `"action":"created"`) || !strings.Contains(string(b), `"comment":`) {
			t.Errorf("not an issue_comment.created body: %.80s", b)
		}
	}
}
