package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/agentos/agentos"

// layers maps a top-level folder to the folders of ours it may import
// (docs/architecture.md: cmd → bot → runtime → kernel → schemas; skills/ and
// workflows/ hold embedded Markdown that the runtime reads).
var layers = map[string][]string{
	"cmd":       {"cmd", "bot", "runtime", "kernel", "schemas", "skills", "workflows"},
	"bot":       {"bot", "runtime", "kernel", "schemas"},
	"runtime":   {"runtime", "kernel", "schemas", "skills", "workflows"},
	"kernel":    {"kernel", "schemas"},
	"schemas":   {"schemas"},
	"skills":    {"skills"},
	"workflows": {"workflows"},
	"bench":     {"bot", "runtime", "kernel", "schemas"},
}

// narrowLayers narrows what some packages of ours may import below their
// folder's layer: bot/github is the GitHub vocabulary (Repo, PullRequest,
// Comment) and client every bot package may use, so it imports nothing of
// ours; bot/review (review, triage, fix proposals) sits below bot/dispatch,
// which routes commands to it and serves it the session lifecycle through
// an interface bot/review declares, so it never imports the dispatcher.
// bot/webhook is intake only (verify, normalise, enqueue); bot/worker
// consumes the queue and hands each Trigger to a dispatcher through an
// interface it declares, so neither imports the dispatcher.
var narrowLayers = map[string][]string{
	"bot/github":  {},
	"bot/review":  {"bot/github", "bot/tracking", "bot/webhook", "runtime", "kernel", "schemas"},
	"bot/webhook": {"bot/queue", "runtime", "kernel", "schemas"},
	"bot/worker":  {"bot/queue", "bot/webhook", "runtime", "kernel", "schemas"},
	// runtime/groupcommit is the one batcher of bot/queue and runtime/store.
	"runtime/groupcommit": {},
}

// confined lists third-party import prefixes and the folders allowed to
// import them directly.
var confined = []struct {
	prefix string
	within []string
}{
	{"github.com/google/go-github/", []string{"bot/", "bench/"}},
	{"github.com/bradleyfalzon/ghinstallation", []string{"bot/"}},
	{"github.com/gin-gonic/gin", []string{"bot/"}},
	{"github.com/go-git/go-git", []string{"kernel/"}},
	{"github.com/openai/openai-go", []string{"runtime/provider/openai"}},
	{"github.com/anthropics/anthropic-sdk-go", []string{"runtime/provider/anthropic"}},
	{"google.golang.org/genai", []string{"runtime/provider/gemini"}},
}

type goPackage struct {
	ImportPath string
	Imports    []string
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	cmd.Dir = "../.."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(&out)
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

func TestImportDirection(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < 5 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		top := strings.SplitN(from, "/", 2)[0]
		allowed, ok := layers[top]
		if !ok {
			t.Errorf("package %s is in top-level folder %q, which has no place in the layering", from, top)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				for _, c := range confined {
					if strings.HasPrefix(imp, c.prefix) && !hasAnyPrefix(from, c.within) {
						t.Errorf("%s imports %s: only %v may", from, imp, c.within)
					}
				}
				continue
			}
			to := strings.SplitN(rel(imp), "/", 2)[0]
			if !contains(allowed, to) {
				t.Errorf("%s imports %s: %s may import only %v", from, rel(imp), top, allowed)
			}
			for pkg, narrow := range narrowLayers {
				if (from == pkg || strings.HasPrefix(from, pkg+"/")) && !strings.HasPrefix(rel(imp), pkg+"/") && !hasAnyPrefix(rel(imp), narrow) {
					t.Errorf("%s imports %s: %s may import only %v of ours", from, rel(imp), pkg, narrow)
				}
			}
		}
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s+"/", p) || strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestReplayIsPure proves structurally that replay cannot call a model or a
// tool: nothing it depends on can reach a provider, the kernel's tools, a
// process or the network.
func TestReplayIsPure(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", module+"/runtime/replay")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net" || dep == "os/exec" {
			t.Errorf("runtime/replay depends on %s", dep)
		}
		for _, banned := range []string{module + "/runtime/provider", module + "/kernel/tools", module + "/kernel/workspace", "net/http"} {
			if dep == banned || strings.HasPrefix(dep, banned+"/") {
				t.Errorf("runtime/replay depends on %s", dep)
			}
		}
	}
}
