package mcp_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/mcp"
)

// TestNpxWithoutNetworkSaysSo: the README's kind of .mcp.json (npx -y
// <server>) in a sandbox without network fails at start; the note says
// why — the end of npx's stderr, and that npx needs the registry or an
// installed server — instead of only "exited during the MCP handshake".
func TestNpxWithoutNetworkSaysSo(t *testing.T) {
	if _, err := exec.LookPath("npx"); err != nil {
		t.Skip("npx is not on PATH")
	}
	dir := t.TempDir()
	pol := policyWith(t, "")
	e := newEnv(t, dir, `{"mcpServers":{"remote":{"command":"npx","args":["-y","@agentos-test/no-such-mcp-server-zzz"]}}}`, pol, mcp.Options{})
	notes := e.m.Register(context.Background(), e.k, nil)
	if len(notes) != 1 {
		t.Fatalf("notes = %v", notes)
	}
	t.Log(notes[0])
	for _, want := range []string{"exited during the MCP handshake", "its stderr ends:", "npx downloads the server", "registry.npmjs.org:443"} {
		if !strings.Contains(notes[0], want) {
			t.Errorf("the note does not say %q:\n%s", want, notes[0])
		}
	}
}
