package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/policy"
	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/claudecode"
)

// doctorCheck is one condition agentos doctor checks in a repository
// before a run meets it: the mechanism in use, git and the project's
// toolchains inside the sandbox, the data directory, masked files, the
// setup phase. Status is ok, warn (the run works, with a difference the
// operator should know) or fail (commands of the run would fail).
type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

const (
	checkOK   = "ok"
	checkWarn = "warn"
	checkFail = "fail"
)

// doctorWorkspace is the repository doctor checks: --workspace, else the
// repository holding the working directory ("" outside one).
func doctorWorkspace(flag string) string {
	if flag != "" {
		return flag
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	top := repoTop(wd)
	if _, err := os.Lstat(filepath.Join(top, ".git")); err != nil {
		return ""
	}
	return top
}

// workspaceChecks runs the checks for the repository at dir under sb.
// dataDirs are the data directories a run in dir would use.
func workspaceChecks(ctx context.Context, sb *sandbox.Sandbox, cfg config.Config, dir string, dataDirs []string) []doctorCheck {
	var out []doctorCheck
	r := sb.Report()
	if r.Mechanism == sandbox.Landlock {
		out = append(out, landlockCheck(r))
	}
	pol, err := loadPolicy(cfg.PolicyFile, nil)
	if err != nil {
		return append(out, doctorCheck{Name: "policy", Status: checkFail, Detail: err.Error(), Fix: "fix the operator's policy file (docs/kernel-policy.md)"})
	}
	red := redact.New(pol.Redaction.Keys)
	ws, err := workspace.Open(dir, workspace.Options{DenyPatterns: pol.Workspace.DenyPatterns, EnvAllow: pol.Execution.EnvAllow, SecretName: red.IsSecretName, Exclude: dataDirs})
	if err != nil {
		return append(out, doctorCheck{Name: "workspace", Status: checkFail, Detail: err.Error()})
	}
	if p, err := loadPolicy(cfg.PolicyFile, ws); err != nil {
		ws.Close()
		return append(out, doctorCheck{Name: "policy", Status: checkFail, Detail: err.Error(), Fix: "fix .agent/policy.yaml (docs/kernel-policy.md)"})
	} else {
		pol = p
	}
	proj := tools.ProjectCommands(ws)
	masked := ws.Masked()
	perms := permissionChecks(ws, pol)
	ws.Close()
	out = append(out, perms...)

	out = append(out, dataDirChecks(r.Mechanism, dir, dataDirs)...)
	if c, ok := maskedCheck(r.Mechanism, masked, dataDirs, dir); ok {
		out = append(out, c)
	}
	out = append(out, setupCheck(dir, proj, pol.SetupNetwork())...)

	// Git and the project's programs, each run in the sandbox as a
	// command of the run would run it (in an empty repository, so that no
	// file of the checked one is touched).
	tmp, err := os.MkdirTemp("", "agentos-doctor-")
	if err != nil {
		return append(out, doctorCheck{Name: "toolchains", Status: checkFail, Detail: "cannot make a scratch directory: " + err.Error()})
	}
	defer os.RemoveAll(tmp)
	if git, err := exec.LookPath("git"); err == nil {
		cmd := exec.CommandContext(ctx, git, "init", "-q", tmp)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "GIT_CONFIG_NOSYSTEM=1"}
		_ = cmd.Run()
	}
	scratch, err := workspace.Open(tmp, workspace.Options{EnvAllow: pol.Execution.EnvAllow, SecretName: red.IsSecretName, Sandbox: sb, Limits: pol.SandboxLimits()})
	if err != nil {
		return append(out, doctorCheck{Name: "toolchains", Status: checkFail, Detail: err.Error()})
	}
	defer scratch.Close()
	for _, p := range programs(proj) {
		out = append(out, programCheck(ctx, scratch, p))
	}
	return out
}

// landlockCheck says what differs when bubblewrap could not be used.
func landlockCheck(r sandbox.Report) doctorCheck {
	c := doctorCheck{Name: "mechanism", Status: checkWarn,
		Detail: "commands run under Landlock, not bubblewrap: no PID namespace (commands run in the host's PID space; /proc is not readable), files the policy masks are moved aside while each command runs, /dev/shm is not writable",
		Fix:    "install bubblewrap (Debian: apt-get install bubblewrap) for mount and PID namespaces"}
	for _, a := range r.Tried {
		if a.Mechanism == sandbox.Bwrap && a.Error != "" {
			c.Detail = "bubblewrap cannot be used (" + a.Error + "); " + c.Detail
			if a.Fix != "" {
				c.Fix = a.Fix
			}
		}
	}
	return c
}

// dataDirChecks: a data directory inside the repository is hidden by a
// mount under bwrap; Landlock cannot hide part of a tree it grants, so
// every command would be refused.
func dataDirChecks(mech sandbox.Mechanism, dir string, dataDirs []string) []doctorCheck {
	var out []doctorCheck
	for _, d := range dataDirs {
		if !insideDir(dir, d) {
			continue
		}
		c := doctorCheck{Name: "data directory", Status: checkOK, Detail: d + " lies in the repository; bubblewrap hides it from commands with a mount"}
		if mech == sandbox.Landlock {
			c.Status = checkFail
			c.Detail = d + " lies in the repository and Landlock cannot hide part of a tree it grants: every command of a run (tests, linters, hooks) would be refused"
			c.Fix = "move it out of the repository (the default is under $XDG_STATE_HOME/agentos; set AGENTOS_DATA or --data), or install bubblewrap"
		}
		out = append(out, c)
	}
	return out
}

// maskedCheck lists the files commands cannot read.
func maskedCheck(mech sandbox.Mechanism, masked, dataDirs []string, dir string) (doctorCheck, bool) {
	var files []string
	for _, m := range masked {
		abs := m
		if !filepath.IsAbs(m) {
			abs = filepath.Join(dir, m)
		}
		skip := false
		for _, d := range dataDirs {
			if insideDir(d, abs) {
				skip = true // the data directory has its own check
			}
		}
		if rel, err := filepath.Rel(dir, abs); err == nil && !skip {
			files = append(files, rel)
		}
	}
	if len(files) == 0 {
		return doctorCheck{}, false
	}
	how := "hidden from commands by mounts"
	if mech == sandbox.Landlock {
		how = "moved aside while each command runs and put back after it"
	}
	shown := files
	if len(shown) > 5 {
		shown = append(append([]string{}, shown[:5]...), fmt.Sprintf("and %d more", len(files)-5))
	}
	return doctorCheck{Name: "masked files", Status: checkOK,
		Detail: fmt.Sprintf("%s (workspace.denyPatterns): %s; tests that need them cannot read them", how, strings.Join(shown, ", "))}, true
}

// setupCheck shows the setup phase and warns where a project's tests
// need dependencies that nothing installs: the network is off during the
// agent phase.
func setupCheck(dir string, p tools.Project, allow []string) []doctorCheck {
	if p.SetupErr != nil {
		return []doctorCheck{{Name: "setup", Status: checkFail, Detail: p.SetupErr.Error(), Fix: "fix .agent/config.yaml (docs/project-config.md)"}}
	}
	net := "no network"
	if len(allow) > 0 {
		net = "network: " + strings.Join(allow, ", ")
	}
	if len(p.Setup.Commands) > 0 {
		how := ".agent/config.yaml"
		if p.Setup.Detected {
			how = "detected"
		}
		return []doctorCheck{{Name: "setup", Status: checkOK, Detail: fmt.Sprintf("%s (%s; %s); the agent phase then runs offline with the caches read-only", strings.Join(p.Setup.Commands, "; "), how, net)}}
	}
	has := func(name string) bool { _, err := os.Lstat(filepath.Join(dir, name)); return err == nil }
	if !p.Setup.Detected {
		return []doctorCheck{{Name: "setup", Status: checkOK, Detail: "none (.agent/config.yaml setup: [])"}}
	}
	switch {
	case has("package.json") && !has("node_modules"):
		return []doctorCheck{{Name: "setup", Status: checkWarn,
			Detail: "package.json without a lock file and no node_modules: npm test would find no dependencies, and the network is off during the run",
			Fix:    "add `setup: [npm install --no-package-lock]` to .agent/config.yaml (docs/project-config.md)"}}
	case has("requirements.txt") || has("pyproject.toml") || has("setup.py"):
		return []doctorCheck{{Name: "setup", Status: checkWarn,
			Detail: "a Python project: nothing installs its dependencies, and the network is off during the run",
			Fix:    "add a `setup:` command to .agent/config.yaml, e.g. `python -m pip install --target .deps -r requirements.txt` (docs/project-config.md)"}}
	}
	return []doctorCheck{{Name: "setup", Status: checkOK, Detail: "nothing to install"}}
}

// program is a program a run will start, and why.
type program struct {
	name string
	why  string
}

// programs are git and the first word of the test, lint and setup
// commands; a path into the repository (./gradlew) is the repository's.
func programs(p tools.Project) []program {
	seen := map[string]bool{"git": true}
	out := []program{{"git", "the repository's own tests and build tools run it"}}
	add := func(command, why string) {
		argv, err := workspace.SplitCommand(command)
		if err != nil || len(argv) == 0 || strings.ContainsRune(argv[0], '/') || seen[argv[0]] {
			return
		}
		seen[argv[0]] = true
		out = append(out, program{argv[0], why + ": " + command})
	}
	if p.TestErr == nil {
		add(p.Test, "test.run")
	}
	if p.LintErr == nil {
		add(p.Lint, "lint.run")
	}
	for _, c := range p.Setup.Commands {
		add(c, "setup")
	}
	sort.SliceStable(out[1:], func(i, j int) bool { return out[1+i].name < out[1+j].name })
	return out
}

// programCheck runs the program in the sandbox: found on the host but
// not runnable inside is a toolchain the sandbox does not show.
func programCheck(ctx context.Context, ws *workspace.Root, p program) doctorCheck {
	c := doctorCheck{Name: p.name}
	path, err := exec.LookPath(p.name)
	if err != nil {
		c.Status, c.Detail = checkFail, fmt.Sprintf("not on this PATH (%s)", p.why)
		c.Fix = "install it, or set the command in .agent/config.yaml (docs/project-config.md)"
		return c
	}
	argv := []string{p.name, "--version"}
	switch p.name {
	case "go":
		argv = []string{"go", "version"}
	case "git":
		argv = []string{"git", "status", "--porcelain"}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := ws.Run(ctx, workspace.RunSpec{Argv: argv, Timeout: time.Minute, MaxOutput: 4096})
	real := path
	if r, err := filepath.EvalSymlinks(path); err == nil {
		real = r
	}
	var ke *kernel.Error
	switch {
	case errors.As(err, &ke):
		c.Status, c.Detail = checkFail, fmt.Sprintf("%s cannot start in the sandbox: %s", path, ke.Message)
	case err != nil:
		c.Status, c.Detail = checkFail, fmt.Sprintf("%s cannot start in the sandbox: %v", path, err)
	case res.ExitCode == 126 || res.ExitCode == 127:
		c.Status = checkFail
		c.Detail = fmt.Sprintf("%s runs on the host but not in the sandbox (exit %d: %s)", path, res.ExitCode, firstLine(res.Stderr+res.Stdout))
		c.Fix = fmt.Sprintf("let commands read its installation: AGENTOS_SANDBOX_READONLY=%s (agentos serve: sandbox_readonly)", installRoot(real))
	case res.ExitCode != 0:
		c.Status = checkWarn
		c.Detail = fmt.Sprintf("%s exits %d in the sandbox: %s", strings.Join(argv, " "), res.ExitCode, firstLine(res.Stderr+res.Stdout))
	default:
		c.Status = checkOK
		v := firstLine(res.Stdout + res.Stderr)
		if p.name == "git" {
			v = "git status works"
		}
		c.Detail = fmt.Sprintf("%s (%s)", v, real)
	}
	return c
}

// installRoot guesses the directory a program needs to run: for a script,
// its interpreter's installation (a shim's #! names it), else the
// program's own (the parent of its bin directory).
func installRoot(prog string) string {
	root := func(p string) string { return filepath.Dir(filepath.Dir(p)) }
	f, err := os.Open(prog)
	if err != nil {
		return root(prog)
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := f.Read(head)
	line := string(head[:n])
	if !strings.HasPrefix(line, "#!") {
		return root(prog)
	}
	line = strings.TrimPrefix(line, "#!")
	if i := strings.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	fields := strings.Fields(line)
	if len(fields) == 0 || !filepath.IsAbs(fields[0]) {
		return root(prog)
	}
	interp := fields[0]
	if filepath.Base(interp) == "env" && len(fields) > 1 {
		if p, err := exec.LookPath(fields[1]); err == nil {
			interp = p
		}
	}
	if r, err := filepath.EvalSymlinks(interp); err == nil {
		interp = r
	}
	return root(interp)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// insideDir reports whether p is dir or lies under it (both made absolute
// and resolved where they exist).
func insideDir(dir, p string) bool {
	abs := func(s string) string {
		a, err := filepath.Abs(s)
		if err != nil {
			return filepath.Clean(s)
		}
		if r, err := filepath.EvalSymlinks(a); err == nil {
			return r
		}
		return a
	}
	d, q := abs(dir), abs(p)
	return q == d || strings.HasPrefix(q, d+string(filepath.Separator))
}

// permissionChecks reports the repository's Claude Code permissions
// (.claude/settings.json, .claude/settings.local.json): the rules agentos
// enforces, and each setting it does not do as written (a warning, also
// recorded in every run's log as config.warning). pol (nil: the
// built-in) says what the allow rules may pre-approve.
func permissionChecks(ws *workspace.Root, pol *policy.Policy) []doctorCheck {
	perms, err := claudecode.ReadPermissions(ws.ReadFile)
	if err != nil {
		return []doctorCheck{{Name: "claude code permissions", Status: checkFail, Detail: err.Error(), Fix: "write the permissions block as Claude Code does (docs/claude-code.md): runs refuse to start until it can be read"}}
	}
	if pol != nil {
		perms.Under(claudecode.Honour{HonorAllow: pol.ClaudeCode.HonorAllow, HonorsAllow: pol.HonorsAllow})
	}
	if len(perms.Files) == 0 {
		return nil
	}
	deny, ask := 0, 0
	for _, r := range perms.Rules {
		deny += len(r.DenyRaw)
		ask += len(r.AskRaw)
	}
	out := []doctorCheck{{Name: "claude code permissions", Status: checkOK, Detail: fmt.Sprintf("%s: %d deny and %d ask rule(s) enforced by the kernel", strings.Join(perms.Files, ", "), deny, ask)}}
	for _, w := range perms.Warnings {
		out = append(out, doctorCheck{Name: "claude code permissions", Status: checkWarn, Detail: w.String(), Fix: "docs/claude-code.md says what agentos does with each setting"})
	}
	return out
}
