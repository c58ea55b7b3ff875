package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	agentrun "github.com/agentos/agentos/runtime/run"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	code = exitCode(err, &errb)
	auditHonest(t, args)
	return out.String(), errb.String(), code
}

// audited counts the sessions auditHonest checked (TestMain reports it).
var audited atomic.Int64

// auditHonest holds every log a command that runs the agent wrote to the
// invariant of honest outcomes (run.AuditHonest): a run reported completed
// passes strict verify and its claims are supported. The logs are read
// from the command's --data store once it returned.
func auditHonest(t *testing.T, args []string) {
	t.Helper()
	if len(args) == 0 {
		return
	}
	switch args[0] {
	case "run", "approve", "deny", "resume", "cancel", "workflow", "workflows":
	default:
		return
	}
	data := ""
	for i, a := range args {
		switch {
		case (a == "--data" || a == "-data") && i+1 < len(args):
			data = args[i+1]
		case strings.HasPrefix(a, "--data="):
			data = strings.TrimPrefix(a, "--data=")
		}
	}
	if data == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(data, "agentos.db")); err != nil {
		return
	}
	sealer, err := newSealer(nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStore(data, sealer)
	if err != nil {
		return // a store the command left locked or broken is the test's to judge
	}
	defer st.Close()
	ctx := context.Background()
	infos, err := st.Sessions(ctx)
	if err != nil {
		return
	}
	for _, info := range infos {
		evs, err := st.Read(ctx, info.SessionID, 1)
		if err != nil {
			continue
		}
		audited.Add(1)
		if err := agentrun.AuditHonest(evs); err != nil {
			t.Errorf("agentos %s: session %s breaks the invariant of honest outcomes: %v", args[0], info.SessionID, err)
		}
	}
}

const example = "../../testdata/example-session/events.jsonl"

func TestVerifyExitCodes(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	torn := filepath.Join(dir, "torn.jsonl")
	if err := os.WriteFile(torn, good[:len(good)-25], 0o644); err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(dir, "edited.jsonl")
	if err := os.WriteFile(edited, bytes.Replace(good, []byte("octocat"), []byte("mallory"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"verify", example}, 0, "OK"},
		{[]string{"verify", torn}, 1, "torn_final_line"},
		{[]string{"verify", edited}, 1, "hash_mismatch"},
		{[]string{"verify"}, 2, "usage"},
		{[]string{"verify", filepath.Join(dir, "missing.jsonl")}, 2, "no such file"},
		{[]string{"verify", "--bogus", example}, 2, "flag"},
		{[]string{"nonsense"}, 2, "unknown command"},
	}
	for _, c := range cases {
		out, errOut, code := runCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", c.args, code, c.code, out, errOut)
		}
		if !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v: output does not mention %q:\n%s%s", c.args, c.want, out, errOut)
		}
	}
}

func TestVerifyJSON(t *testing.T) {
	out, _, code := runCLI(t, "verify", "--json", example)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rep struct {
		Valid  bool
		Events int
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Valid || rep.Events == 0 {
		t.Fatalf("%v %+v\n%s", err, rep, out)
	}
}

func TestReplayCommand(t *testing.T) {
	out, errOut, code := runCLI(t, "replay", example)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"session.start", "turn.terminal", "status    completed", "hello, world"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = runCLI(t, "replay", example, "--json")
	var snap struct {
		Closed bool
		Output string
	}
	if code != 0 || json.Unmarshal([]byte(out), &snap) != nil || !snap.Closed || snap.Output != "hello, world" {
		t.Fatalf("replay --json: exit %d %+v\n%s", code, snap, out)
	}
}

func TestVersion(t *testing.T) {
	out, _, code := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "agentos ") {
		t.Fatalf("exit %d %q", code, out)
	}
}
