package tools

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/workspace"
)

// SetupCommands: .agent/config.yaml's setup: wins (an empty list is
// none); otherwise go mod download for a go.mod that requires modules
// (not vendored), npm ci --ignore-scripts for a lock file, nothing else
// (docs/project-config.md).
func TestSetupCommands(t *testing.T) {
	cases := []struct {
		name     string
		files    map[string]string
		want     []string
		detected bool
	}{
		{"empty repository", map[string]string{"README": "x"}, nil, true},
		{"go.mod without requirements", map[string]string{"go.mod": "module m\n\ngo 1.22\n"}, nil, true},
		{"go.mod with a require line", map[string]string{"go.mod": "module m\n\ngo 1.22\n\nrequire github.com/google/uuid v1.6.0\n"}, []string{"go mod download"}, true},
		{"go.mod with a require block", map[string]string{"go.mod": "module m\n\nrequire (\n\tgithub.com/google/uuid v1.6.0\n)\n"}, []string{"go mod download"}, true},
		{"vendored", map[string]string{"go.mod": "module m\n\nrequire github.com/google/uuid v1.6.0\n", "vendor/modules.txt": "# github.com/google/uuid v1.6.0\n"}, nil, true},
		{"package.json without a lock file", map[string]string{"package.json": "{}"}, nil, true},
		{"package-lock.json", map[string]string{"package.json": "{}", "package-lock.json": "{}"}, []string{"npm ci --ignore-scripts"}, true},
		{"npm-shrinkwrap.json", map[string]string{"package.json": "{}", "npm-shrinkwrap.json": "{}"}, []string{"npm ci --ignore-scripts"}, true},
		{"both", map[string]string{"go.mod": "module m\nrequire x.org/y v1.0.0\n", "package-lock.json": "{}"}, []string{"go mod download", "npm ci --ignore-scripts"}, true},
		{"configured", map[string]string{"go.mod": "module m\nrequire x.org/y v1.0.0\n", ".agent/config.yaml": "setup:\n  - go mod download -x\n  - npm ci\n"}, []string{"go mod download -x", "npm ci"}, false},
		{"configured none", map[string]string{"package-lock.json": "{}", ".agent/config.yaml": "setup: []\n"}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range c.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ws, err := workspace.Open(dir, workspace.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()
			got, err := SetupCommands(ws)
			if err != nil {
				t.Fatal(err)
			}
			if (len(got.Commands) > 0 || len(c.want) > 0) && !reflect.DeepEqual(got.Commands, c.want) || got.Detected != c.detected {
				t.Fatalf("got %#v, want %#v detected %v", got, c.want, c.detected)
			}
		})
	}
	// A bad file or an empty command is an error naming the file.
	for _, cfg := range []string{"setup: go mod download\n", "setup:\n  - ''\n", "setup: [x]\nunknown: 1\n"} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, ".agent"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".agent", "config.yaml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		ws, err := workspace.Open(dir, workspace.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = SetupCommands(ws)
		ws.Close()
		var ke *kernel.Error
		if !errors.As(err, &ke) || ke.Message[:len(".agent/config.yaml")] != ".agent/config.yaml" {
			t.Fatalf("%q: %v", cfg, err)
		}
	}
}

// SetupArgv splits like test.run and refuses a shell unless allowed.
func TestSetupArgv(t *testing.T) {
	argv, err := SetupArgv(`npm ci --prefix "a b"`, false)
	if err != nil || !reflect.DeepEqual(argv, []string{"npm", "ci", "--prefix", "a b"}) {
		t.Fatalf("%q %v", argv, err)
	}
	var ke *kernel.Error
	if _, err := SetupArgv("sh -c 'go mod download && npm ci'", false); !errors.As(err, &ke) || ke.Code != kernel.CodePolicyDenied {
		t.Fatalf("shell: %v", err)
	}
	if argv, err := SetupArgv("sh -c 'go mod download && npm ci'", true); err != nil || len(argv) != 3 {
		t.Fatalf("allowed shell: %q %v", argv, err)
	}
}
