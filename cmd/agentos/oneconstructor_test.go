package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// assembled are what makes a run's runtime, and the only places outside
// their own package that may build one: an engine (run.Engine), a
// workflow plane (cycle.Executor) and a kernel (kernel.New) come from
// runtime/setup (Build; Kernel for the kernel alone), so the CLI, the
// API, the bot, the Action and the demo run the same assembly. The guard
// benchmark measures a bare kernel of the default policy.
var assembled = []struct {
	pkg, name string // import path (under module) and the type or func
	call      bool   // kernel.New(...) rather than a composite literal
	allowed   []string
}{
	{"runtime/run", "Engine", false, []string{"runtime/setup"}},
	{"runtime/workflow/cycle", "Executor", false, []string{"runtime/setup"}},
	{"kernel", "New", true, []string{"runtime/setup", "kernel/guard/bench"}},
}

// constructions lists, for every non-test Go file under root, where it
// builds one of assembled: "dir: pkg.name" for each occurrence outside
// the thing's own package.
func constructions(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		// The local names of the imports we look for.
		local := map[string]string{} // local name -> import path under module
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module+"/") {
				continue
			}
			p = strings.TrimPrefix(p, module+"/")
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			local[name] = p
		}
		sel := func(e ast.Expr) (pkg, name string) {
			s, ok := e.(*ast.SelectorExpr)
			if !ok {
				return "", ""
			}
			id, ok := s.X.(*ast.Ident)
			if !ok {
				return "", ""
			}
			return local[id.Name], s.Sel.Name
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var pkg, name string
			var call bool
			switch n := n.(type) {
			case *ast.CompositeLit:
				pkg, name = sel(n.Type)
			case *ast.CallExpr:
				pkg, name = sel(n.Fun)
				call = true
			default:
				return true
			}
			for _, a := range assembled {
				if a.pkg == pkg && a.name == name && a.call == call && dir != a.pkg {
					found = append(found, dir+": "+pkg+"."+name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(found)
	return found
}

// TestEveryEngineFromOneConstructor: outside runtime/setup, no code of
// the repository (tests aside) builds a run engine, a workflow plane or a
// kernel itself.
func TestEveryEngineFromOneConstructor(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range constructions(t, docsRoot) {
		dir, what, _ := strings.Cut(c, ": ")
		seen[what] = true
		ok := false
		for _, a := range assembled {
			if a.pkg+"."+a.name == what {
				for _, p := range a.allowed {
					ok = ok || dir == p
				}
			}
		}
		if !ok {
			t.Errorf("%s builds %s itself: take it from runtime/setup (Build, or Kernel for a kernel alone)", dir, what)
		}
	}
	// The reader finds what setup builds: it is not blind.
	for _, a := range assembled {
		if !seen[a.pkg+"."+a.name] {
			t.Errorf("found no construction of %s.%s at all, not even in runtime/setup: the reader is broken", a.pkg, a.name)
		}
	}
}
