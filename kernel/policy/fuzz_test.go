package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// policySeeds are the policy files users read: the built-in one and every
// policy.yaml block in the README and docs/kernel-policy.md.
func policySeeds(tb testing.TB) []string {
	seeds := []string{DefaultYAML, "", "capabilities: {}\n", "network:\n  allow: []\n"}
	block := regexp.MustCompile("(?s)```ya?ml\n(.*?)```")
	for _, p := range []string{"../../README.md", "../../docs/kernel-policy.md"} {
		b, err := os.ReadFile(filepath.FromSlash(p))
		if err != nil {
			tb.Fatal(err)
		}
		for _, m := range block.FindAllSubmatch(b, -1) {
			if bytes.Contains(m[1], []byte("capabilities:")) || bytes.Contains(m[1], []byte("network:")) {
				seeds = append(seeds, string(m[1]))
			}
		}
	}
	return seeds
}

// FuzzParse: any file parses or fails with a positioned *Error, never a
// panic; a parsed policy survives a round trip through its JSON form and
// merges with the default.
func FuzzParse(f *testing.F) {
	for _, s := range policySeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		// No wall-clock bound here: on a loaded machine (load 60 on two
		// cores) a 2 s bound failed on "0000.A", which parses in
		// microseconds. A parse that is really slow shows as the fuzzer's
		// executions per second and as go test's -timeout.
		p, err := Parse("policy.yaml", strings.NewReader(src))
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if pe.File != "policy.yaml" || pe.Msg == "" {
				t.Fatalf("error without file or message: %+v", pe)
			}
			return
		}
		js := fileForm(t, p)
		again, err := Parse("roundtrip.yaml", bytes.NewReader(js))
		if err != nil {
			t.Fatalf("a parsed policy does not parse again as JSON: %v\n%s\nfrom %q", err, js, src)
		}
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("round trip changed the policy:\n%+v\n%+v", p, again)
		}
		m := Merge(Default(), p)
		for c := range p.Capabilities {
			switch m.Approval(c) {
			case Never, Risk, Always:
			default:
				t.Fatalf("merged approval of %s = %q", c, m.Approval(c))
			}
		}
	})
}

// fileForm is p as a policy file would say it: JSON (a YAML subset) with
// the values not given (nil maps and lists, JSON null) left out.
func fileForm(t *testing.T, p *Policy) []byte {
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	var prune func(m map[string]any)
	prune = func(m map[string]any) {
		for k, v := range m {
			switch v := v.(type) {
			case nil:
				delete(m, k)
			case map[string]any:
				prune(v)
			}
		}
	}
	prune(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
