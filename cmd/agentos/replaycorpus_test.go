package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/viewer"
)

// TestReplayCorpus: session logs written by earlier agentos commits
// (testdata/replay-corpus, made by its generate.sh from this repository's
// history) are still read by the current code: strict verify accepts
// them, replay rebuilds the finished session, and the run viewer builds
// its page model. A change that stops reading an old log fails here, not
// on a user's artifact branch.
func TestReplayCorpus(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "..", "testdata", "replay-corpus", "*", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("the replay corpus has %d logs, want at least 3", len(dirs))
	}
	for _, log := range dirs {
		name := filepath.Base(filepath.Dir(log))
		t.Run(name, func(t *testing.T) {
			if out, errOut, code := runCLI(t, "verify", "--json", log); code != exitOK {
				t.Fatalf("verify: exit %d\n%s%s", code, out, errOut)
			}
			out, errOut, code := runCLI(t, "replay", log, "--json")
			var snap struct {
				Closed    bool
				RunStatus string `json:"run_status"`
				Output    string
			}
			if code != exitOK || json.Unmarshal([]byte(out), &snap) != nil {
				t.Fatalf("replay: exit %d\n%s%s", code, out, errOut)
			}
			if !snap.Closed || !strings.Contains(snap.Output, "CheckToken") {
				t.Errorf("replay snapshot of the demo: %+v", snap)
			}
			f, err := os.Open(log)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			evs, err := viewer.ReadEvents(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := viewer.Build(name, evs, time.Now()); err != nil {
				t.Errorf("viewer: %v", err)
			}
		})
	}
}
