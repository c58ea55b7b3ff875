package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/provider/simulator"
)

// simRepo writes the demo sample and the large log the huge-output
// behaviour reads (about 2 MB, "token" on every line).
func simRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	if err := demo.WriteSample(repo); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; b.Len() < 2<<20; i++ {
		b.WriteString("2026-11-28T20:00:00Z GET /api/items?page=1 token=rejected client=")
		b.WriteString(strings.Repeat("x", i%40))
		b.WriteString("\n")
	}
	writeFile(t, repo, simulator.HugeFile, b.String())
	return repo
}

// TestSimulatorMatrix runs every behaviour of the misbehaving-model
// simulator through `agentos run` (the openai provider pointed at the
// simulator, as a user points it at a compatible server), answering each
// approval with `agentos approve` (or `agentos deny` where the behaviour
// is about a denial) until the run ends. Each run must end the honest way
// for its behaviour, and none may do anything dishonest: a log strict
// verify rejects, completed when it should not be or with a claim its
// log does not support, a tool.result whose ok contradicts it. -v prints
// the matrix docs/simulator.md shows.
func TestSimulatorMatrix(t *testing.T) {
	testenv.LookPath(t, "go") // test.run runs the sample's go test
	srv := simulator.Start(t)
	var rows []simulator.Row
	for _, b := range simulator.Behaviours() {
		row := simulator.Row{Behaviour: b}
		t.Run(b.Name, func(t *testing.T) {
			openAIEnv(t, srv.URL(), "", b.Model())
			repo, data := simRepo(t), t.TempDir()
			common := []string{"--repo", repo, "--data", data, "--json"}
			stdout, stderr, code := runCLI(t, append([]string{"run", "--session", "sim"}, append(common, simulator.Prompt)...)...)
			var r runReport
			for round := 0; ; round++ {
				r = runReport{}
				if err := json.Unmarshal([]byte(stdout), &r); err != nil || r.Status == "" {
					t.Fatalf("round %d: exit %d, no report: %v\n%s\n%s", round, code, err, stdout, stderr)
				}
				if want := statusExit[r.Status]; code != want {
					t.Errorf("round %d: exit %d for status %s, want %d", round, code, r.Status, want)
				}
				if r.Status != "paused" {
					break
				}
				if round == 6 || len(r.Pending) != 1 {
					t.Fatalf("round %d: still paused with %d pending", round, len(r.Pending))
				}
				decision := "approve"
				if b.Deny {
					decision = "deny"
				}
				stdout, stderr, code = runCLI(t, append([]string{decision, "sim", r.Pending[0].ApprovalID, "--by", "octocat"}, common...)...)
			}
			if srv.Completions(b.Model()) == 0 {
				t.Fatalf("the run never called the simulator's %s", b.Model())
			}
			log, err := os.ReadFile(r.LogPath)
			if err != nil {
				t.Fatal(err)
			}
			authGo, _ := os.ReadFile(filepath.Join(repo, "auth.go"))
			v := simulator.Judge(b, log, string(authGo))
			row.Add(v)
			if os.Getenv("AGENTOS_SIM_TRACE") != "" {
				trace, _, _ := runCLI(t, "replay", r.LogPath)
				t.Logf("%s: %s\n%s", b.Name, v.Did, trace)
			}
			if _, verr, vcode := runCLI(t, "verify", r.LogPath); vcode != exitOK {
				t.Errorf("agentos verify: exit %d %s", vcode, verr)
			}
			if len(v.Dishonest) > 0 || !v.Honest {
				reason := ""
				if r.Terminal != nil {
					reason = r.Terminal.Reason
				}
				trace, _, _ := runCLI(t, "replay", r.LogPath)
				t.Errorf("%s: did %q (%s)\ndishonest: %q\nnot shown: %q\n%s", b.Name, v.Did, reason, v.Dishonest, v.Missing, trace)
			}
			if r.Status != "completed" && (r.Terminal == nil || r.Terminal.Reason == "" || r.Terminal.NextAction == "") {
				t.Errorf("a run that did not complete has no clear report: %+v", r.Terminal)
			}
		})
		rows = append(rows, row)
	}
	t.Logf("simulator matrix through `agentos run`:\n%s", simulator.Table(rows))
}
