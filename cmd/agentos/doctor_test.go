package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/testenv"
)

// TestDoctor: agentos doctor reports the sandbox, checks from inside that
// the server's data, key and config are hidden, and exits non-zero when
// commands would be refused.
func TestDoctor(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	key := filepath.Join(dir, "app.pem")
	cfgFile := filepath.Join(dir, "agentos.yaml")
	for p, c := range map[string]string{filepath.Join(data, "agentos.db"): "db", key: "not a key", cfgFile: "data_dir: " + data + "\n"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("auto", func(t *testing.T) {
		t.Setenv("AGENTOS_SANDBOX", "")
		out, errs, code := runCLI(t, "doctor", "--config", cfgFile, "--json")
		var rep doctorReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("doctor --json: %v\n%s%s", err, out, errs)
		}
		if !rep.Sandbox.Ready {
			testenv.Require(t, "an OS sandbox", &sandbox.UnavailableError{Mode: sandbox.ModeAuto, Tried: rep.Sandbox.Tried})
		}
		if code != 0 || rep.Probe == nil || rep.Problem != "" {
			t.Fatalf("exit %d, problem %q\n%s%s", code, rep.Problem, out, errs)
		}
		realData, _ := filepath.EvalSymlinks(data)
		realCfg, _ := filepath.EvalSymlinks(cfgFile)
		checked := map[string]bool{}
		for _, c := range rep.Checked {
			checked[c.Path] = true
			if c.Visible {
				t.Errorf("%s is visible from inside the sandbox", c.Path)
			}
		}
		if !checked[realData] || !checked[realCfg] {
			t.Errorf("doctor did not check the data dir and the config file: %+v", rep.Checked)
		}
		if !strings.HasPrefix(rep.Probe.Network, "blocked") {
			t.Errorf("network from inside: %s", rep.Probe.Network)
		}
	})
	t.Run("none", func(t *testing.T) {
		t.Setenv("AGENTOS_SANDBOX", "none")
		out, _, code := runCLI(t, "doctor", "--config", cfgFile)
		if code != 0 || !strings.Contains(out, "UNCONFINED") {
			t.Errorf("exit %d\n%s", code, out)
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Setenv("AGENTOS_SANDBOX", "bwrap")
		t.Setenv("PATH", dir) // no bwrap here
		out, errs, code := runCLI(t, "doctor", "--config", cfgFile)
		if code != exitFailure || !strings.Contains(out, "apt-get install bubblewrap") || !strings.Contains(errs, "commands would be refused") {
			t.Errorf("exit %d, want %d naming the fix\n%s%s", code, exitFailure, out, errs)
		}
	})
	t.Run("bad mode", func(t *testing.T) {
		t.Setenv("AGENTOS_SANDBOX", "chroot")
		if _, errs, code := runCLI(t, "doctor"); code != exitUsage || !strings.Contains(errs, "sandbox") {
			t.Errorf("exit %d: %s", code, errs)
		}
	})
}

// TestLauncherStartsBeforeHeavyInits: the sandbox's launcher (an init
// function in kernel/sandbox/internal/launch) takes over before the
// agentos binary initialises its heavy packages, so a command does not
// pay for them once or twice per run. Checked on this test binary, which
// links what agentos links, with the runtime's own init trace.
func TestLauncherStartsBeforeHeavyInits(t *testing.T) {
	cmd := exec.Command(os.Args[0], sandbox.LauncherArg, `{"stage":"no-such-stage"}`)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !sandbox.SetupFailed(ee.ExitCode(), stderr.String()) {
		t.Fatalf("the launcher did not answer: %v\n%s", err, stderr.String())
	}
	inited := map[string]bool{}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "init" {
			inited[f[1]] = true
		}
	}
	if !inited["runtime"] {
		t.Fatalf("no init trace:\n%s", stderr.String())
	}
	// (The launcher's own package never appears: the trace line is written
	// after an init function returns, and this one exits.)
	for _, heavy := range []string{"github.com/prometheus/client_golang/prometheus", "github.com/santhosh-tekuri/jsonschema/v6", "github.com/gin-gonic/gin"} {
		if inited[heavy] {
			t.Errorf("%s was initialised before the launcher ran", heavy)
		}
	}
}

// TestDoctorWorkspace: in a repository, doctor runs git and the project's
// own programs in the sandbox and warns, before any run, about what would
// break one: a toolchain found on the host that commands cannot run (a
// script whose interpreter lies outside what the sandbox shows, as a
// pyenv shim does), a data directory inside the repository under
// Landlock, dependencies nothing installs. Under both mechanisms.
func TestDoctorWorkspace(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	interp := filepath.Join(dir, "interp")
	bin := filepath.Join(dir, "tools", "bin")
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Skip("no /bin/sh to copy")
	}
	files := map[string]string{
		filepath.Join(repo, ".agent", "config.yaml"):  "test: mytool run\n",
		filepath.Join(repo, "package.json"):           `{"name":"x","devDependencies":{"tap":"1"}}`,
		filepath.Join(repo, ".env"):                   "TOKEN=1\n",
		filepath.Join(repo, ".agentos", "agentos.db"): "db",
		filepath.Join(bin, "mytool"):                  "#!" + filepath.Join(interp, "bin", "sh") + "\necho mytool 1.0\n",
		filepath.Join(interp, "bin", "sh"):            string(sh),
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	t.Setenv("AGENTOS_DATA", "")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	doctor := func(t *testing.T) (doctorReport, map[string]doctorCheck, int) {
		out, errs, code := runCLI(t, "doctor", "--workspace", repo, "--json")
		var rep doctorReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("doctor --json: %v\n%s%s", err, out, errs)
		}
		if !rep.Sandbox.Ready {
			testenv.Require(t, "an OS sandbox", &sandbox.UnavailableError{Mode: rep.Sandbox.Mode, Tried: rep.Sandbox.Tried})
		}
		checks := map[string]doctorCheck{}
		for _, c := range rep.Checks {
			checks[c.Name] = c
		}
		return rep, checks, code
	}
	for _, mech := range []string{"bwrap", "landlock"} {
		t.Run(mech, func(t *testing.T) {
			if _, err := exec.LookPath("bwrap"); err != nil && mech == "bwrap" {
				t.Skip("bubblewrap is not on PATH")
			}
			t.Setenv("AGENTOS_SANDBOX", mech)
			t.Setenv("AGENTOS_SANDBOX_READONLY", "")
			rep, checks, code := doctor(t)
			if code != exitFailure || rep.Problem == "" {
				t.Errorf("exit %d (problem %q), want %d", code, rep.Problem, exitFailure)
			}
			if c := checks["git"]; c.Status != checkOK {
				t.Errorf("git in the sandbox: %+v", c)
			}
			if c := checks["mytool"]; c.Status != checkFail || !strings.Contains(c.Fix, "AGENTOS_SANDBOX_READONLY="+interp) {
				t.Errorf("a toolchain the sandbox does not show: %+v", c)
			}
			if c := checks["setup"]; c.Status != checkWarn || !strings.Contains(c.Fix, "npm install") {
				t.Errorf("dependencies nothing installs: %+v", c)
			}
			data := checks["data directory"]
			if want := map[string]string{"bwrap": checkOK, "landlock": checkFail}[mech]; data.Status != want {
				t.Errorf("data directory in the repository: %+v, want %s", data, want)
			}
			if c := checks["masked files"]; !strings.Contains(c.Detail, ".env") || strings.Contains(c.Detail, ".agentos") {
				t.Errorf("masked files: %+v", c)
			}
			if _, ok := checks["mechanism"]; ok != (mech == "landlock") {
				t.Errorf("mechanism warning under %s: %v", mech, checks["mechanism"])
			}

			// The fix doctor printed works.
			t.Setenv("AGENTOS_SANDBOX_READONLY", interp)
			_, checks, _ = doctor(t)
			if c := checks["mytool"]; c.Status != checkOK || !strings.Contains(c.Detail, "mytool 1.0") {
				t.Errorf("with the fix applied: %+v", c)
			}
		})
	}
}
