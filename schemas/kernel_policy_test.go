package schemas

import (
	"strings"
	"testing"
)

// TestKernelPolicyClaudeCode: kernel_policy_v2's claudeCode.honorAllow
// takes capabilities and prefix.* globs, nothing wider and no other key.
func TestKernelPolicyClaudeCode(t *testing.T) {
	r := MustDefault()
	for _, ok := range []string{
		`{"claudeCode":{}}`,
		`{"claudeCode":{"honorAllow":[]}}`,
		`{"claudeCode":{"honorAllow":["test.run","lint.run","mcp.docs.*","mcp.*","mcp.s.get-doc_v2"]}}`,
	} {
		if err := r.ValidateJSON("kernel_policy_v2", []byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for doc, want := range map[string]string{
		`{"claudeCode":{"honorAllow":["*"]}}`:           "/claudeCode/honorAllow/0",
		`{"claudeCode":{"honorAllow":["mcp*"]}}`:        "/claudeCode/honorAllow/0",
		`{"claudeCode":{"honorAllow":["a b"]}}`:         "/claudeCode/honorAllow/0",
		`{"claudeCode":{"honorAllow":[""]}}`:            "/claudeCode/honorAllow/0",
		`{"claudeCode":{"honorAllow":"test.run"}}`:      "/claudeCode/honorAllow",
		`{"claudeCode":{"allow":["Bash"]}}`:             "/claudeCode",
		`{"claudeCode":{"honorAllow":["x.*.*"]}}`:       "/claudeCode/honorAllow/0",
		`{"claudeCode":{"honorAllow":[true]}}`:          "/claudeCode/honorAllow/0",
		`{"claudeCode":{"honorAllow":["ok"],"x":true}}`: "/claudeCode",
	} {
		err := r.ValidateJSON("kernel_policy_v2", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error at %s", doc, err, want)
		}
	}
}
