package action_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/demo"
)

// TestStartupWorld is the world .github/measure-startup.sh runs the real
// `agentos action` binary against, to time a job from its start to its
// first model call: the strict fake GitHub (every request checked against
// GitHub's OpenAPI description) and a git server on one address, with
// octo/app holding the demo's sample repository. It runs only when
// AGENTOS_STARTUP_WORLD names a directory: it writes there world.env (the
// Actions variables a job needs) and event.json (an `/agent` comment
// asking for the demo's fix), serves until the script creates the file
// "stop" (or 30 minutes pass), and fails if agentos made a request GitHub
// would not accept.
func TestStartupWorld(t *testing.T) {
	dir := os.Getenv("AGENTOS_STARTUP_WORLD")
	if dir == "" {
		t.Skip("the fixture of .github/measure-startup.sh: set AGENTOS_STARTUP_WORLD to a directory to serve it")
	}
	a := newActions(t)
	ev, err := json.Marshal(a.commentEvent("alice", "/agent "+demo.Prompt))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "event.json"), ev, 0o644); err != nil {
		t.Fatal(err)
	}
	vars := []string{
		"GITHUB_API_URL=" + a.apiURL,
		"GITHUB_SERVER_URL=https://github.example",
		"GITHUB_REPOSITORY=octo/app",
		"GITHUB_EVENT_NAME=issue_comment",
		"GITHUB_EVENT_PATH=" + filepath.Join(dir, "event.json"),
		"INPUT_GITHUB_TOKEN=" + ghToken,
		"AGENTOS_STARTUP_BARE=" + a.bare,
	}
	env := ""
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		env += fmt.Sprintf("export %s=%q\n", k, val)
	}
	if err := os.WriteFile(filepath.Join(dir, "world.env.part"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	// Renamed into place: the script waits for it.
	if err := os.Rename(filepath.Join(dir, "world.env.part"), filepath.Join(dir, "world.env")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(dir, "stop")); err == nil {
			return // the fake's strictness check runs at cleanup
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no stop file within 30 minutes")
}
