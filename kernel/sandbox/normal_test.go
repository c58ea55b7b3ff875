package sandbox_test

import (
	"archive/zip"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
	"github.com/agentos/agentos/kernel/workspace"
)

// samples are the sample Go module and npm package, laid out once in the
// shared directory (the same worktree paths for every mechanism, so the
// private Go build cache is built once).
var samples struct {
	once       sync.Once
	goDir      string
	npmDir     string
	err        error
	goErr      error
	npmMissing error
}

// prepareSamples writes the samples and prefills the caches outside the
// sandbox: the module cache gets the sample's one dependency from a
// file:// module proxy (no network), the npm cache a packed dependency.
func prepareSamples(t testing.TB) (goDir, npmDir string) {
	t.Helper()
	dir := sharedDir(t)
	samples.once.Do(func() {
		samples.goDir, samples.goErr = prepareGo(dir)
		samples.npmDir, samples.err = prepareNPM(dir)
	})
	if samples.goErr != nil {
		t.Fatalf("prepare the Go sample: %v", samples.goErr)
	}
	if samples.err != nil {
		t.Fatalf("prepare the npm sample: %v", samples.err)
	}
	return samples.goDir, samples.npmDir
}

func writeFiles(root string, files map[string]string) error {
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func prepareGo(dir string) (string, error) {
	if _, err := exec.LookPath("go"); err != nil {
		return "", err
	}
	// A module proxy on disk with example.com/greet v1.0.0.
	proxy := filepath.Join(dir, "goproxy", "example.com", "greet", "@v")
	mod := "module example.com/greet\n\ngo 1.21\n"
	if err := writeFiles(proxy, map[string]string{
		"list":        "v1.0.0\n",
		"v1.0.0.info": `{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}`,
		"v1.0.0.mod":  mod,
	}); err != nil {
		return "", err
	}
	zf, err := os.Create(filepath.Join(proxy, "v1.0.0.zip"))
	if err != nil {
		return "", err
	}
	zw := zip.NewWriter(zf)
	for name, body := range map[string]string{
		"example.com/greet@v1.0.0/go.mod":   mod,
		"example.com/greet@v1.0.0/greet.go": "package greet\n\n// Hello greets.\nfunc Hello(who string) string { return \"hello, \" + who }\n",
	} {
		w, err := zw.Create(name)
		if err != nil {
			return "", err
		}
		if _, err := w.Write([]byte(body)); err != nil {
			return "", err
		}
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	if err := zf.Close(); err != nil {
		return "", err
	}
	work := filepath.Join(dir, "sample-go")
	if err := writeFiles(work, map[string]string{
		"go.mod":         "module example.com/sample\n\ngo 1.21\n\nrequire example.com/greet v1.0.0\n",
		"sample.go":      "package sample\n\nimport \"example.com/greet\"\n\n// Greeting greets the world.\nfunc Greeting() string { return greet.Hello(\"world\") }\n",
		"sample_test.go": "package sample\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif got := Greeting(); got != \"hello, world\" {\n\t\tt.Fatalf(\"got %q\", got)\n\t}\n}\n",
		".git/HEAD":      "ref: refs/heads/main\n",
	}); err != nil {
		return "", err
	}
	// Prefill the module cache (and write go.sum) outside the sandbox.
	cmd := exec.Command("go", "mod", "download", "-x")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOMODCACHE="+filepath.Join(dir, "modcache"), "GOPROXY=file://"+filepath.Join(dir, "goproxy"), "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go mod download: %v\n%s", err, out)
	}
	cmd = exec.Command("go", "mod", "tidy")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOMODCACHE="+filepath.Join(dir, "modcache"), "GOPROXY=off", "GOSUMDB=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go mod tidy: %v\n%s", err, out)
	}
	// The module cache is read-only in the sandbox, as Go leaves it.
	return work, nil
}

func prepareNPM(dir string) (string, error) {
	if _, err := exec.LookPath("npm"); err != nil {
		samples.npmMissing = err
		return "", nil
	}
	dep := map[string]string{
		"package.json": `{"name":"pad-local","version":"1.0.0","main":"index.js"}`,
		"index.js":     "module.exports = (s, n) => String(s).padStart(n, '0');\n",
	}
	work := filepath.Join(dir, "sample-npm")
	files := map[string]string{
		"package.json":     `{"name":"sample","version":"1.0.0","private":true,"scripts":{"test":"node --test"},"dependencies":{"pad-local":"1.0.0"}}`,
		"test/pad.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\nconst pad = require('pad-local');\ntest('pads', () => { assert.strictEqual(pad(7, 3), '007'); });\n",
		".git/HEAD":        "ref: refs/heads/main\n",
	}
	for p, c := range dep {
		files["node_modules/pad-local/"+p] = c
	}
	if err := writeFiles(work, files); err != nil {
		return "", err
	}
	// Prefill the npm cache with the packed dependency.
	depDir := filepath.Join(dir, "pad-local")
	if err := writeFiles(depDir, dep); err != nil {
		return "", err
	}
	cache := filepath.Join(dir, "npmcache")
	pack := exec.Command("npm", "pack", "--pack-destination", dir)
	pack.Dir = depDir
	pack.Env = append(os.Environ(), "npm_config_cache="+cache, "npm_config_update_notifier=false")
	if out, err := pack.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm pack: %v\n%s", err, out)
	}
	add := exec.Command("npm", "cache", "add", filepath.Join(dir, "pad-local-1.0.0.tgz"))
	add.Dir = dir
	add.Env = pack.Env
	if out, err := add.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm cache add: %v\n%s", err, out)
	}
	return work, nil
}

func runIn(t testing.TB, s *sandbox.Sandbox, dir string, network []string, argv ...string) (workspace.RunResult, error) {
	t.Helper()
	ws, err := workspace.Open(dir, workspace.Options{Sandbox: s, Network: network})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	return ws.Run(context.Background(), workspace.RunSpec{Argv: argv, Timeout: 15 * time.Minute, MaxOutput: 1 << 16})
}

// TestNormalPath: the tests of a Go module and of an npm package pass
// inside the sandbox, with the network off and the caches read-only.
func TestNormalPath(t *testing.T) {
	testenv.LookPath(t, "go")
	goDir, npmDir := prepareSamples(t)
	for _, mode := range mechanisms {
		t.Run(string(mode), func(t *testing.T) {
			s := detect(t, mode)
			t.Run("go test", func(t *testing.T) {
				res, err := runIn(t, s, goDir, nil, "go", "test", "-count=1", "./...")
				if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "ok  \texample.com/sample") {
					t.Fatalf("go test: err %v, exit %d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
				}
			})
			t.Run("npm test", func(t *testing.T) {
				testenv.Require(t, "npm", samples.npmMissing)
				res, err := runIn(t, s, npmDir, nil, "npm", "test")
				if err != nil || res.ExitCode != 0 || !strings.Contains(res.Stdout, "pass 1") {
					t.Fatalf("npm test: err %v, exit %d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
				}
			})
			t.Run("python from the PATH (a version manager's shims)", func(t *testing.T) {
				py, err := exec.LookPath("python3")
				if err != nil {
					t.Skip("no python3 on PATH")
				}
				res, err := runIn(t, s, goDir, nil, "python3", "-c", "import sys, json; print(json.dumps(sys.version_info[:2]))")
				if err != nil || res.ExitCode != 0 || !strings.HasPrefix(strings.TrimSpace(res.Stdout), "[3,") {
					t.Fatalf("%s: err %v, exit %d\n%s%s", py, err, res.ExitCode, res.Stdout, res.Stderr)
				}
			})
			t.Run("module cache is read-only", func(t *testing.T) {
				res, err := runIn(t, s, goDir, nil, "go", "clean", "-modcache")
				if err == nil && res.ExitCode == 0 {
					if _, serr := os.Stat(filepath.Join(sharedDir(t), "modcache", "example.com")); serr != nil {
						t.Fatalf("go clean -modcache emptied the read-only module cache")
					}
				}
			})
		})
	}
}

// proxyScript talks to the egress proxy named by HTTPS_PROXY with bash
// alone: CONNECT to target, then a plain GET through the tunnel.
const proxyScript = `set -u
p=${HTTPS_PROXY#http://}; cred=${p%@*}; hp=${p#*@}
auth=$(printf %s "$cred" | base64 -w0)
ask() { # $1 CONNECT target, $2 with credentials (yes/no)
  exec 3<>/dev/tcp/${hp%:*}/${hp##*:} || { echo "no proxy"; return; }
  if [ "$2" = yes ]; then h="Proxy-Authorization: Basic $auth"; else h="X-None: 1"; fi
  printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n\r\n' "$1" "$1" "$h" >&3
  read -r status <&3
  echo "CONNECT $1 ($2): $status"
  case "$status" in *" 200 "*)
    while read -r l <&3; do [ "$l" = $'\r' ] && break; done
    printf 'GET /hello HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" >&3
    cat <&3 | tail -n 1; echo;;
  esac
  exec 3<&-
}
ask "$1" yes
ask "$1" no
ask registry.invalid.example:443 yes
`

// TestNetworkAllowList: with an allow-list, a command reaches the allowed
// host through the egress proxy (HTTP CONNECT), and only it; with none,
// there is no proxy at all.
func TestNetworkAllowList(t *testing.T) {
	testenv.LookPath(t, "bash")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from the registry") }))
	defer srv.Close()
	host := srv.Listener.Addr().(*net.TCPAddr)
	target := host.String()
	for _, mode := range mechanisms {
		t.Run(string(mode), func(t *testing.T) {
			s := detect(t, mode)
			work := t.TempDir()
			res, err := runIn(t, s, work, []string{target}, "bash", "-c", proxyScript, "proxy", target)
			if err != nil {
				t.Fatalf("run: %v\n%s%s", err, res.Stdout, res.Stderr)
			}
			out := res.Stdout
			for _, want := range []string{
				"CONNECT " + target + " (yes): HTTP/1.1 200",
				"hello from the registry",
				"CONNECT " + target + " (no): HTTP/1.1 407",
				"CONNECT registry.invalid.example:443 (yes): HTTP/1.1 403",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("missing %q in\n%s%s", want, out, res.Stderr)
				}
			}
			// Direct connections still fail: the allow-list only opens the proxy.
			res, _ = runIn(t, s, work, []string{target}, "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && echo DIRECT", host.Port))
			if strings.Contains(res.Stdout, "DIRECT") {
				t.Errorf("a direct connection to an allowed address got through:\n%s", res.Stdout)
			}
			// Without an allow-list there is no proxy.
			res, _ = runIn(t, s, work, nil, "bash", "-c", `echo "proxy=[${HTTPS_PROXY:-}]"`)
			if !strings.Contains(res.Stdout, "proxy=[]") {
				t.Errorf("HTTPS_PROXY set without an allow-list: %s", res.Stdout)
			}
		})
	}
}
