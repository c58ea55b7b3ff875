package kernel_test

import (
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/toolrule"
	"github.com/agentos/agentos/kernel/tools"
)

func permissions(t *testing.T, deny, ask []string) *toolrule.Permissions {
	t.Helper()
	p, problems := toolrule.NewPermissions(".claude/settings.json", deny, ask, func(string) ([]string, bool) { return nil, false })
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	return p
}

// TestPermissionsDenyAndAsk: the repository's deny rules refuse a call
// at stage "permissions" naming the rule and the file; an ask rule makes
// a call that policy runs without approval wait for one; a write to a
// path an Edit deny rule names is refused once its paths are known.
func TestPermissionsDenyAndAsk(t *testing.T) {
	e := setup(t, openPolicy, nil)
	e.k.Permissions = []*toolrule.Permissions{permissions(t, []string{"Read(auth.go)", "Edit(go.mod)"}, []string{"Bash(go vet:*)"})}

	_, err := e.call("repo.read", `{"path":"auth.go"}`)
	if code(err) != kernel.CodeToolNotAllowed || !strings.Contains(err.Error(), ".claude/settings.json permissions.deny rule Read(auth.go)") {
		t.Fatalf("repo.read auth.go: %v, want TOOL_NOT_ALLOWED naming the rule", err)
	}
	if _, err := e.call("repo.read", `{"path":"go.mod"}`); err != nil {
		t.Fatalf("repo.read go.mod: %v", err)
	}
	out, err := e.call("process.run", `{"command":"go vet ./..."}`)
	if err != nil || out.Pending == nil || !strings.Contains(out.Pending.Risk.Reason, "permissions.ask rule Bash(go vet:*)") {
		t.Fatalf("go vet: %v %+v, want a pending approval naming the ask rule", err, out.Pending)
	}
	out, err = e.call("repo.write", `{"path":"go.mod","content":"module x\n","expected_hash":"`+tools.Sha256Hex([]byte("module example.com/x\n\ngo 1.22\n"))+`"}`)
	if code(err) != kernel.CodeToolNotAllowed || !strings.Contains(err.Error(), "Edit(go.mod)") {
		t.Fatalf("repo.write go.mod: %v %+v, want TOOL_NOT_ALLOWED", err, out)
	}
	rej, reached := rejections(t, e)
	if len(rej) != 2 || rej[0]["stage"] != "permissions" || rej[1]["stage"] != "permissions" {
		t.Errorf("rejections %v", rej)
	}
	if strings.Join(reached, ",") != "tool.invoke:repo.read,approval.requested:process.run" {
		t.Errorf("reached %v", reached)
	}
}
