package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// seedExample is seed 003 §41's policy.yaml, verbatim.
const seedExample = `workspace:
  root: ./
  denyPatterns:
    - "**/.git/**"

execution:
  timeouts:
    process.run: 300s

capabilities:
  repo.read:
    approval: never
  repo.search:
    approval: never
  repo.patch:
    approval: always
  process.run:
    approval: risk

risk:
  highRiskCommands:
    - rm
    - sudo
    - curl
    - wget

redaction:
  keys:
    - SECRET
    - TOKEN
    - API_KEY

limits:
  maxStdout: 20000
  maxDiffSize: 200000
`

func TestSeedExampleAccepted(t *testing.T) {
	p, err := Parse("policy.yaml", strings.NewReader(seedExample))
	if err != nil {
		t.Fatal(err)
	}
	if p.Approval("repo.patch") != Always || p.Approval("process.run") != Risk || p.Approval("repo.read") != Never {
		t.Errorf("approvals %+v", p.Capabilities)
	}
	if p.Approval("unknown.tool") != Always {
		t.Error("an unknown capability must need approval")
	}
	if p.Timeout("process.run") != 300*time.Second || p.Limits.MaxStdout != 20000 || !p.IsHighRisk("/usr/bin/curl") || p.IsHighRisk("go") {
		t.Errorf("policy %+v", p)
	}
}

func TestDefaults(t *testing.T) {
	p := Default()
	if p.Approval("repo.read") != Never || p.Approval("repo.patch") != Always || p.Approval("process.run") != Always {
		t.Fatalf("defaults must follow the seed: %+v", p.Capabilities)
	}
}

func TestErrorsHavePositions(t *testing.T) {
	cases := []struct {
		doc, path string
		line      int
	}{
		{"workspace:\n  root: ./\n  denyPaterns: [x]\n", "/workspace", 3},
		{"capabilities:\n  repo.patch:\n    approval: sometimes\n", "/capabilities/repo.patch/approval", 3},
		{"limits:\n  maxStdout: lots\n", "/limits/maxStdout", 2},
		{"execution:\n  timeouts:\n    process.run: 5 minutes\n", "/execution/timeouts/process.run", 3},
		{"bogus: 1\n", "/", 1},
	}
	for _, c := range cases {
		_, err := Parse("p.yaml", strings.NewReader(c.doc))
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%q: got %v, want *Error", c.doc, err)
			continue
		}
		if pe.Path != c.path || pe.Line != c.line || !strings.HasPrefix(pe.Error(), "p.yaml:") {
			t.Errorf("%q: got %v (path %s line %d), want path %s line %d", c.doc, pe, pe.Path, pe.Line, c.path, c.line)
		}
	}
	if _, err := Parse("p.yaml", strings.NewReader("a: [")); err == nil {
		t.Error("invalid YAML accepted")
	}
}

func TestMergeOnlyTightens(t *testing.T) {
	repo, err := Parse("repo", strings.NewReader(`capabilities:
  repo.patch: {approval: never}
  repo.read: {approval: always}
workspace:
  denyPatterns: ["secrets/**"]
limits:
  maxStdout: 999999
execution:
  allowShell: true
  timeouts:
    process.run: 10s
`))
	if err != nil {
		t.Fatal(err)
	}
	m := Merge(Default(), repo)
	if m.Approval("repo.patch") != Always {
		t.Error("a repository loosened repo.patch")
	}
	if m.Approval("repo.read") != Always {
		t.Error("a repository could not tighten repo.read")
	}
	if m.Limits.MaxStdout != 20000 || m.Timeout("process.run") != 10*time.Second || m.Execution.AllowShell {
		t.Errorf("limits %+v timeouts %+v shell %v", m.Limits, m.Execution.Timeouts, m.Execution.AllowShell)
	}
	found := false
	for _, d := range m.Workspace.DenyPatterns {
		found = found || d == "secrets/**"
	}
	if !found {
		t.Error("repository deny pattern lost")
	}
}
