// Package demo bundles the sample repository and scripted model responses
// that `agentos demo` runs: a small Go module whose CheckToken accepts any
// prefix of the token, with a failing test.
package demo

import (
	"bytes"
	"embed"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentos/agentos/runtime/provider/scripted"
)

//go:embed testdata/sample/* testdata/fix-auth.script.yaml
var files embed.FS

// Prompt is the demo's request.
const Prompt = "fix the failing token check in auth.go"

// WriteSample writes the sample repository into dir. go.mod is stored as
// go.mod.txt so the sample is not a nested module of this one.
func WriteSample(dir string) error {
	return fs.WalkDir(files, "testdata/sample", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(p, "testdata/sample/"), ".txt")
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

// Script returns the scripted model responses for the demo.
func Script() (*scripted.Script, error) {
	b, err := files.ReadFile("testdata/fix-auth.script.yaml")
	if err != nil {
		return nil, err
	}
	return scripted.Parse(bytes.NewReader(b))
}
