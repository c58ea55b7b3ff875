package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// seedExample is the specification's example policy.yaml, verbatim.
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

// TestGuardRepairSwitch: guard.repair defaults to on, parses, and a
// repository can turn it off but not back on.
func TestGuardRepairSwitch(t *testing.T) {
	if !Default().GuardRepair() {
		t.Fatal("repair is off by default")
	}
	off, err := Parse("op", strings.NewReader("guard:\n  repair: false\n"))
	if err != nil || off.GuardRepair() {
		t.Fatalf("guard.repair: false → %v %v", off, err)
	}
	on, err := Parse("repo", strings.NewReader("guard: {repair: true}\n"))
	if err != nil || !on.GuardRepair() {
		t.Fatalf("guard.repair: true → %v", err)
	}
	if Merge(off, on).GuardRepair() {
		t.Error("a repository turned repair back on")
	}
	if Merge(Default(), off).GuardRepair() {
		t.Error("a repository could not turn repair off")
	}
	if !Merge(Default(), on).GuardRepair() {
		t.Error("merging two policies that allow repair turned it off")
	}
	if _, err := Parse("bad", strings.NewReader("guard:\n  repair: maybe\n")); err == nil || !strings.Contains(err.Error(), "bad:2:") {
		t.Errorf("bad guard.repair: %v", err)
	}
}

// TestSandboxSettings: v2's network allow-list and process limits parse,
// bad entries are errors with their position, and a repository can only
// narrow the operator's allow-list and lower the limits.
func TestSandboxSettings(t *testing.T) {
	op, err := Parse("operator", strings.NewReader(`network:
  allow: ["*.npmjs.org", "proxy.golang.org:443", "sum.golang.org:443"]
limits:
  cpuTime: 10m
  memoryMB: 4096
  processes: 512
  fileSizeMB: 1024
  openFiles: 4096
`))
	if err != nil {
		t.Fatal(err)
	}
	l := op.SandboxLimits()
	if l.CPU != 10*time.Minute || l.Memory != 4096<<20 || l.Processes != 512 || l.FileSize != 1024<<20 || l.OpenFiles != 4096 {
		t.Errorf("SandboxLimits = %+v", l)
	}
	repo, err := Parse("repo", strings.NewReader(`network:
  allow: ["registry.npmjs.org", "proxy.golang.org", "evil.example"]
limits:
  cpuTime: 1h
  processes: 64
`))
	if err != nil {
		t.Fatal(err)
	}
	m := Merge(op, repo)
	if got := strings.Join(m.Network.Allow, ","); got != "registry.npmjs.org" {
		t.Errorf("merged allow-list %q, want only what the operator covers", got)
	}
	if m.Limits.CPUTime != "10m" || m.Limits.Processes != 64 || m.Limits.MemoryMB != 4096 {
		t.Errorf("merged limits %+v", m.Limits)
	}
	// No network section in the repository: the operator's list holds.
	if m := Merge(op, Default()); len(m.Network.Allow) != 3 {
		t.Errorf("inherited allow-list %v", m.Network.Allow)
	}
	// An empty list turns the network off.
	off, err := Parse("repo", strings.NewReader("network:\n  allow: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m := Merge(op, off); m.Network.Allow == nil || len(m.Network.Allow) != 0 {
		t.Errorf("allow: [] gave %v, want no network", m.Network.Allow)
	}
	// The built-in default allows no network.
	if len(Default().Network.Allow) != 0 {
		t.Errorf("default allow-list %v", Default().Network.Allow)
	}
	for _, c := range []struct {
		doc, path string
		line      int
	}{
		{"network:\n  allow:\n    - registry.npmjs.org\n    - \"*.com\"\n", "/network/allow/1", 4},
		{"network:\n  allow: [\"http://x.example\"]\n", "/network/allow/0", 2},
		{"network:\n  deny: [x]\n", "/network", 2},
		{"limits:\n  processes: 2\n", "/limits/processes", 2},
		{"limits:\n  cpuTime: forever\n", "/limits/cpuTime", 2},
	} {
		_, err := Parse("p.yaml", strings.NewReader(c.doc))
		var pe *Error
		if !errors.As(err, &pe) || pe.Path != c.path || pe.Line != c.line {
			t.Errorf("%q: got %v, want an error at %s line %d", c.doc, err, c.path, c.line)
		}
	}
}
