package skills

import (
	"slices"
	"testing"
)

func TestTakesMountedAndUnnamed(t *testing.T) {
	for _, c := range []struct {
		s    Skill
		want bool
	}{
		{Skill{Root: ".claude/skills", DeclaredTools: []string{"Read"}}, false},
		{Skill{Root: ".claude/skills"}, true},
		{Skill{Root: BuiltinRoot, DeclaredTools: []string{"repo.read"}}, true},
	} {
		if got := c.s.TakesMounted(); got != c.want {
			t.Errorf("%+v: TakesMounted %v, want %v", c.s, got, c.want)
		}
	}
	got := Unnamed([]string{"repo.read", "mcp.db.select"}, []string{"mcp.db.*", "mcp.everything.*"})
	if !slices.Equal(got, []string{"mcp.everything.*"}) {
		t.Errorf("Unnamed = %v", got)
	}
}
