package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestRefusesNonLoopback(t *testing.T) {
	err := run(context.Background(), []string{"-secret", "s", "-addr", "0.0.0.0:0"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("run on 0.0.0.0 = %v", err)
	}
}

func TestServes(t *testing.T) {
	for _, tc := range []struct{ name, kind string }{
		{"ours", "ours"},
		{"bare", "bare"},
	} {
		kind := tc.kind
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"-kind", kind, "-secret", "s3", "-dir", t.TempDir(), "-process"}, pw, io.Discard)
				pw.Close()
			}()
			line, err := bufio.NewReader(pr).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			go io.Copy(io.Discard, pr)
			addr := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
			body := []byte(`{"action":"created","issue":{"number":1},"comment":{"id":1,"body":"hi"},"repository":{"full_name":"o/r"},"sender":{"login":"u"}}`)
			m := hmac.New(sha256.New, []byte("s3"))
			m.Write(body)
			for sig, want := range map[string]int{"sha256=" + hex.EncodeToString(m.Sum(nil)): 202, "sha256=" + strings.Repeat("0", 64): 401} {
				req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/webhook", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-GitHub-Event", "issue_comment")
				req.Header.Set("X-GitHub-Delivery", "d-"+sig[7:15])
				req.Header.Set("X-Hub-Signature-256", sig)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("%s: got %d, want %d", kind, resp.StatusCode, want)
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}
