package toolrule

import (
	"encoding/json"
	"testing"
)

// BenchmarkPermissionsCheck is what the repository's permission rules
// add to one process.run call: the deny check and the ask check of a
// compound command against testdata/claude-project's kind of rules.
func BenchmarkPermissionsCheck(b *testing.B) {
	p, problems := NewPermissions(".claude/settings.json", []string{"Read(./.env)", "Read(calc.py)", "Bash(rm:*)", "Edit(build/**)"}, []string{"Bash(git push:*)", "Read(docs/internal/**)"}, resolveForTest)
	if len(problems) > 0 {
		b.Fatal(problems)
	}
	args, _ := json.Marshal(map[string]string{"command": "go test ./... && go vet ./... | tee build/vet.txt"})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if r := p.Denied("process.run", args); r != nil {
			b.Fatal(r)
		}
		if why := p.Ask("process.run", args, "", nil); why != "" {
			b.Fatal(why)
		}
	}
}
