package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The setup phase's network (docs/project-config.md): the built-in
// registries unless the operator names a list; [] is none; a repository
// narrows it and cannot widen it; a bad rule is an error at its position.
func TestSetupNetwork(t *testing.T) {
	parse := func(name, src string) *Policy {
		t.Helper()
		p, err := Parse(name, strings.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	def := Default()
	if got := def.SetupNetwork(); !reflect.DeepEqual(got, DefaultSetupNetwork) || len(got) == 0 {
		t.Fatalf("default setup network %v", got)
	}
	for _, want := range []string{"proxy.golang.org:443", "sum.golang.org:443", "registry.npmjs.org:443"} {
		if !contains(DefaultSetupNetwork, want) {
			t.Fatalf("the default lacks %s", want)
		}
	}
	// The caller's copy is its own.
	def.SetupNetwork()[0] = "evil.example"
	if DefaultSetupNetwork[0] == "evil.example" {
		t.Fatal("SetupNetwork returned the default's array")
	}

	op := parse("operator.yaml", "setup:\n  network:\n    allow: [proxy.golang.org:443, registry.npmjs.org]\n")
	if got := op.SetupNetwork(); !reflect.DeepEqual(got, []string{"proxy.golang.org:443", "registry.npmjs.org"}) {
		t.Fatalf("operator's list %v", got)
	}
	if got := parse("off.yaml", "setup:\n  network:\n    allow: []\n").SetupNetwork(); got == nil || len(got) != 0 {
		t.Fatalf("[] is no network, got %#v", got)
	}

	// A repository narrows (an entry the operator's list does not cover
	// is dropped) and an absent list inherits.
	repo := parse(".agent/policy.yaml", "setup:\n  network:\n    allow: [registry.npmjs.org:443, evil.example:443, '*']\n")
	if got := Merge(op, repo).SetupNetwork(); !reflect.DeepEqual(got, []string{"registry.npmjs.org:443"}) {
		t.Fatalf("narrowed %v", got)
	}
	if got := Merge(def, repo).SetupNetwork(); !reflect.DeepEqual(got, []string{"registry.npmjs.org:443"}) {
		t.Fatalf("narrowed from the default %v", got)
	}
	if got := Merge(op, parse("r.yaml", "limits:\n  maxStdout: 10\n")).SetupNetwork(); !reflect.DeepEqual(got, op.SetupNetwork()) {
		t.Fatalf("inherited %v", got)
	}
	if got := Merge(op, parse("r.yaml", "setup:\n  network:\n    allow: []\n")).SetupNetwork(); len(got) != 0 {
		t.Fatalf("a repository turns it off: %v", got)
	}
	// A repository's list does not change the agent phase's network.
	if got := Merge(op, repo).Network.Allow; got != nil {
		t.Fatalf("network.allow %v", got)
	}

	// Errors name the position; unknown keys are refused.
	_, err := Parse("bad.yaml", strings.NewReader("setup:\n  network:\n    allow:\n      - 'http://x'\n"))
	var pe *Error
	if !errors.As(err, &pe) || pe.Line != 4 || !strings.HasPrefix(pe.Path, "/setup/network/allow") {
		t.Fatalf("bad rule: %#v", err)
	}
	if _, err := Parse("bad.yaml", strings.NewReader("setup:\n  commands: [go mod download]\n")); !errors.As(err, &pe) || pe.Line != 2 {
		t.Fatalf("unknown key: %#v", err)
	}
}

func TestSetupTimeout(t *testing.T) {
	if d := Default().SetupTimeout(); d != DefaultSetupTimeout {
		t.Fatalf("default %v", d)
	}
	p, err := Parse("p.yaml", strings.NewReader("execution:\n  timeouts:\n    setup.run: 90s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := p.SetupTimeout(); d != 90*time.Second {
		t.Fatalf("configured %v", d)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
