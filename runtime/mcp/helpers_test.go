package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/mcp"
)

// npmDir is where .ci/npm-deps.sh installs the npm packages tests use.
func npmDir() string {
	if d := os.Getenv("AGENTOS_NPM_DIR"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "agentos-npm")
}

// npmServer returns the entry point of an npm MCP server package, or ends
// the test (a failure under CI=true).
func npmServer(t testing.TB, pkg, entry string) string {
	t.Helper()
	p := filepath.Join(npmDir(), "node_modules", pkg, entry)
	_, err := os.Stat(p)
	if err != nil {
		err = fmt.Errorf("%s (install with bash .ci/npm-deps.sh): %w", pkg, err)
	}
	testenv.Require(t, "npm package "+pkg, err)
	testenv.LookPath(t, "node")
	return p
}

var (
	sbOnce sync.Once
	sb     *sandbox.Sandbox
)

// testSandbox is a real sandbox in which the npm packages are readable
// (stdio MCP servers run confined, like every command).
func testSandbox(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	sbOnce.Do(func() {
		cache := filepath.Join(os.TempDir(), fmt.Sprintf("agentos-sandboxtest-%d", os.Getuid()))
		var ro []string
		if _, err := os.Stat(npmDir()); err == nil {
			ro = append(ro, npmDir())
		}
		sb = sandbox.Detect(context.Background(), sandbox.Config{Mode: sandbox.ModeAuto, CacheDir: cache, GoCache: filepath.Join(cache, "go-build"), ReadOnly: ro})
	})
	testenv.Require(t, "an OS sandbox for commands (bubblewrap, or Landlock)", sb.Err())
	return sb
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// faultServer builds testdata/faultserver once and copies it into dir
// (stdio servers run in the sandbox, which sees only the worktree and
// the toolchains); it returns the path relative to dir.
func faultServer(t testing.TB, dir string) string {
	t.Helper()
	buildOnce.Do(func() {
		out := filepath.Join(os.TempDir(), fmt.Sprintf("agentos-mcp-faultserver-%d", os.Getpid()))
		cmd := exec.Command("go", "build", "-o", out, "./testdata/faultserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build faultserver: %v\n%s", err, b)
			return
		}
		buildBin = out
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(buildBin)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	outPath := filepath.Join(dir, "bin", "faultserver")
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return "./bin/faultserver"
}

// recorder keeps kernel events in memory.
type recorder struct {
	mu  sync.Mutex
	evs []rec
}

type rec struct {
	Type    string
	Payload map[string]any
}

func (r *recorder) Record(_ context.Context, typ, _ string, payload any, _ string) (string, error) {
	b, err := json.Marshal(payload)
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, rec{typ, m})
	return fmt.Sprintf("e%d", len(r.evs)), nil
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		out = append(out, e.Type)
	}
	return out
}

func (r *recorder) last(typ string) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.evs) - 1; i >= 0; i-- {
		if r.evs[i].Type == typ {
			return r.evs[i].Payload
		}
	}
	return nil
}

// env is one test worktree with a kernel and a mount.
type env struct {
	dir string
	ws  *workspace.Root
	k   *kernel.Kernel
	m   *mcp.Mount
}

// policyYAML allows the named tools without approval, on top of the
// built-in defaults.
func policyWith(t testing.TB, extra string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test", strings.NewReader(policy.DefaultYAML+extra))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newEnv(t testing.TB, dir string, cfgJSON string, pol *policy.Policy, o mcp.Options) *env {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the sandbox runs on Linux")
	}
	if err := os.WriteFile(filepath.Join(dir, ".mcp.json"), []byte(cfgJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir, workspace.Options{Sandbox: testSandbox(t), EnvAllow: pol.Execution.EnvAllow, Network: pol.Network.Allow})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	cfg, err := mcp.ReadConfigFile(ws.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	o.Starter = ws
	if o.Expander.Getenv == nil {
		o.Expander = mcp.Expander{Allow: pol.Execution.EnvAllow, Getenv: os.Getenv}
	}
	if o.Network == nil {
		o.Network = pol.Network.Allow
	}
	m := mcp.NewMount(cfg, o)
	t.Cleanup(func() { m.Close() })
	k := kernel.New(pol, ws, nil)
	return &env{dir: dir, ws: ws, k: k, m: m}
}

// allow sets approval: never for the named tools.
func allow(p *policy.Policy, names ...string) {
	for _, n := range names {
		p.Capabilities[n] = struct {
			Approval string `json:"approval"`
		}{policy.Never}
	}
}
