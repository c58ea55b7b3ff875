package workflow

import (
	"strings"
	"testing"
)

func TestArtifactNaming(t *testing.T) {
	a, err := loadBuiltin(t).Artifact("review")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(a.Placeholders(), ","); got != "pr,generation" {
		t.Fatalf("placeholders %s", got)
	}
	name, err := a.Name(map[string]string{"pr": "42", "generation": "1"})
	if err != nil || name != "reviews/pr-42-gen-1.json" {
		t.Fatalf("name %q %v", name, err)
	}
	for _, bad := range []map[string]string{
		{"pr": "42"}, // missing
		{"pr": "../x", "generation": "1"},
		{"pr": "..", "generation": "1"},
		{"pr": "a/b", "generation": "1"},
		{"pr": "42", "generation": "1", "prr": "typo"},
	} {
		if n, err := a.Name(bad); err == nil {
			t.Errorf("%v: named %q", bad, n)
		}
	}
}
