package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentos/agentos/bot/config"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/runtime/setup"
)

// serverSandbox detects the sandbox of agentos serve: the mode from the
// server config (sandbox:, AGENTOS_SANDBOX). The toolchains commands need
// are found from this process's own environment (PATH, GOROOT,
// GOMODCACHE), which is what commands inherit. The Go build cache is one
// per worktree — sessions of different repositories must not share build
// outputs — unless AGENTOS_SANDBOX_GO_CACHE names a shared directory.
func serverSandbox(ctx context.Context, cfg config.Config) (*sandbox.Sandbox, error) {
	mode, err := sandbox.ParseMode(cfg.Sandbox)
	if err != nil {
		return nil, err
	}
	gocache := os.Getenv(setup.EnvGoCache)
	if gocache == setup.GoCachePerWorktree {
		gocache = ""
	}
	return sandbox.Detect(ctx, sandbox.Config{Mode: mode, GoCache: gocache, ReadOnly: cfg.SandboxReadOnly}), nil
}

// logSandbox says at start which sandbox commands run in: loudly when
// they run unconfined or are refused.
func logSandbox(log *slog.Logger, sb *sandbox.Sandbox) {
	r := sb.Report()
	switch {
	case r.Mechanism == sandbox.None:
		log.Warn("SANDBOX DISABLED (sandbox: none): commands the agent runs — tests, linters, hooks, the repository's own code — run UNCONFINED with this server's files, keys, network and processes; every tracking comment says so", "mode", r.Mode)
	case !r.Ready:
		log.Warn("no sandbox could be set up: exec tools and hook commands are refused until one works (run agentos doctor)", "mode", r.Mode, "error", r.Error)
	default:
		log.Info("commands run in a sandbox", "mechanism", r.Mechanism, "mode", r.Mode, "process_limit", r.ProcessLimit, "landlock_abi", r.LandlockABI)
		if r.Warning != "" {
			log.Warn("sandbox: "+r.Warning, "mechanism", r.Mechanism)
		}
	}
}

// doctorReport is agentos doctor --json.
type doctorReport struct {
	Sandbox sandbox.Report       `json:"sandbox"`
	Probe   *sandbox.ProbeResult `json:"probe,omitempty"`
	Checked []doctorPath         `json:"checked,omitempty"`
	// Workspace is the repository checked (--workspace, else the one
	// holding the working directory), Checks what a run in it would meet.
	Workspace string        `json:"workspace,omitempty"`
	Checks    []doctorCheck `json:"checks,omitempty"`
	Problem   string        `json:"problem,omitempty"`
}

type doctorPath struct {
	Path    string `json:"path"`
	Visible bool   `json:"visible"`
}

// doctorOptions are doctor's flags: only those it reads. --config and
// --data are serve's (doctor checks the server's configuration), read
// through the same loader; serve's other flags (--addr, --store) mean
// nothing to doctor and are not accepted.
type doctorOptions struct {
	config, data, workspace *string
	json                    *bool
}

// doctorFlags registers doctor's flags.
func doctorFlags(fs *flag.FlagSet) *doctorOptions {
	return &doctorOptions{
		config:    fs.String("config", "", "the server's YAML config file: its sandbox, data directory, policy and key are checked"),
		data:      fs.String("data", "", "the data directory a run would use (default: <repository>/.agentos for the workspace checks, else the config's)"),
		json:      fs.Bool("json", false, "print JSON"),
		workspace: fs.String("workspace", "", "the repository to check (default: the one holding the working directory)"),
	}
}

// load reads the configuration as serve does (defaults, --config, the
// environment, then the flags given).
func (o *doctorOptions) load(fs *flag.FlagSet, getenv func(string) string) (config.Config, error) {
	inner := flag.NewFlagSet("doctor", flag.ContinueOnError)
	inner.SetOutput(io.Discard)
	f := config.BindFlags(inner)
	var given []string
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name == "config" || fl.Name == "data" {
			given = append(given, "--"+fl.Name+"="+fl.Value.String())
		}
	})
	if err := inner.Parse(given); err != nil {
		return config.Config{}, err
	}
	return f.Load(getenv)
}

// cmdDoctor shows the sandbox commands run in and what a command can see
// from inside; it exits non-zero when commands would be refused, or when
// a path that must stay hidden is visible.
func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	opts := doctorFlags(fs)
	asJSON, wsFlag := opts.json, opts.workspace
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("usage: agentos doctor [--workspace DIR] [--config FILE] [--data DIR] [--json]")
	}
	cfg, err := opts.load(fs, os.Getenv)
	if err != nil {
		return usageErrorf("doctor: %v", err)
	}
	sb, err := serverSandbox(ctx, cfg)
	if err != nil {
		return usageErrorf("doctor: %v", err)
	}
	rep := doctorReport{Sandbox: sb.Report()}
	if rep.Sandbox.Ready && rep.Sandbox.Mechanism != sandbox.None {
		hidden := hiddenPaths(cfg, configPath(args))
		res, err := sb.Probe(ctx, sandbox.ProbeOptions{Hidden: hidden})
		if err != nil {
			rep.Problem = "the probe failed: " + err.Error()
		} else {
			rep.Probe = &res
			seen := map[string]bool{}
			for _, p := range res.Readable {
				seen[p] = true
			}
			for _, p := range hidden {
				rep.Checked = append(rep.Checked, doctorPath{Path: p, Visible: seen[p]})
				if seen[p] && rep.Problem == "" {
					rep.Problem = p + " is visible to commands: keep secrets out of the directories the sandbox shows (PATH, toolchains, caches)"
				}
			}
		}
	}
	if !rep.Sandbox.Ready {
		rep.Problem = "commands would be refused: " + rep.Sandbox.Error
	}
	if dir := doctorWorkspace(*wsFlag); dir != "" && rep.Sandbox.Ready {
		rep.Workspace = dir
		data := dataDirFor(dir)
		if flagGiven(args, "data") {
			data = cfg.DataDir
		}
		rep.Checks = workspaceChecks(ctx, sb, cfg, dir, []string{data})
		for _, c := range rep.Checks {
			if c.Status == checkFail && rep.Problem == "" {
				rep.Problem = c.Name + ": " + c.Detail
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printDoctor(stdout, rep)
	}
	if rep.Problem != "" {
		return &exitError{code: exitFailure, err: errors.New(rep.Problem)}
	}
	return nil
}

// flagGiven reports whether the flag name was given on the command line.
func flagGiven(args []string, name string) bool {
	for _, a := range args {
		for _, p := range []string{"-", "--"} {
			if a == p+name || strings.HasPrefix(a, p+name+"=") {
				return true
			}
		}
	}
	return false
}

// configPath is the --config value as given, for the hidden-path checks.
func configPath(args []string) string {
	for i, a := range args {
		switch {
		case (a == "--config" || a == "-config") && i+1 < len(args):
			return args[i+1]
		case strings.HasPrefix(a, "--config="), strings.HasPrefix(a, "-config="):
			return a[strings.IndexByte(a, '=')+1:]
		}
	}
	return ""
}

// hiddenPaths are the existing paths a command must not be able to read:
// the server's data, key, config, profile and policy, the user's
// credentials, and the host's shadow file.
func hiddenPaths(cfg config.Config, configFile string) []string {
	cands := []string{cfg.DataDir, cfg.GitHubPrivateKeyFile, configFile, cfg.ProfileFile, cfg.PolicyFile, "/etc/shadow"}
	if home, err := os.UserHomeDir(); err == nil {
		for _, d := range []string{".ssh", ".aws", ".config/gh", ".netrc", ".npmrc", ".docker/config.json", ".git-credentials"} {
			cands = append(cands, filepath.Join(home, d))
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range cands {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		} else {
			continue // does not exist: nothing to hide
		}
		if !seen[abs] {
			seen[abs] = true
			out = append(out, abs)
		}
	}
	return out
}

func printDoctor(w io.Writer, rep doctorReport) {
	r := rep.Sandbox
	state := "yes: exec tools and hook commands run in the sandbox"
	switch {
	case r.Mechanism == sandbox.None:
		state = "yes, UNCONFINED: " + r.Warning
	case !r.Ready:
		state = "NO: exec tools and hook commands are refused"
	}
	fmt.Fprintf(w, "sandbox    %s (mode %s)\nready      %s\n", r.Mechanism, r.Mode, state)
	if r.Launcher != "" {
		kind := ""
		if r.LauncherKind != "" {
			kind = " (" + string(r.LauncherKind) + ")"
		}
		fmt.Fprintf(w, "launcher   %s%s\n", r.Launcher, kind)
		if r.LauncherNote != "" {
			fmt.Fprintf(w, "           %s\n", r.LauncherNote)
		}
	}
	if r.Bwrap != "" {
		fmt.Fprintf(w, "bwrap      %s\n", r.Bwrap)
	}
	if r.LandlockABI > 0 {
		fmt.Fprintf(w, "landlock   ABI %d\n", r.LandlockABI)
	}
	if r.ProcessLimit != "" {
		fmt.Fprintf(w, "processes  limited by %s\n", r.ProcessLimit)
	}
	if len(r.Limited) > 0 {
		fmt.Fprintf(w, "limited    %s\n", strings.Join(r.Limited, "\n           "))
	}
	if len(r.Unlimited) > 0 {
		fmt.Fprintf(w, "NOT limited %s\n", strings.Join(r.Unlimited, "\n           "))
	}
	if len(r.ReadOnly) > 0 {
		fmt.Fprintf(w, "read-only  %s\n", strings.Join(r.ReadOnly, "\n           "))
	}
	for _, a := range r.Tried {
		res := "works"
		if a.Error != "" {
			res = "fails: " + a.Error
			if a.Fix != "" {
				res += "\n           fix: " + a.Fix
			}
		}
		fmt.Fprintf(w, "tried      %s: %s\n", a.Mechanism, res)
	}
	if r.Warning != "" && r.Mechanism != sandbox.None {
		fmt.Fprintf(w, "warning    %s\n", r.Warning)
	}
	if p := rep.Probe; p != nil {
		procs := fmt.Sprintf("%d processes visible", p.Processes)
		if p.Processes < 0 {
			procs = "no /proc"
		}
		fmt.Fprintf(w, "a command sees:\n  pid %d, uid %d, %s\n  network: %s\n  host unix socket: %s\n", p.PID, p.UID, procs, p.Network, p.UnixSocket)
		for _, c := range rep.Checked {
			mark := "hidden "
			if c.Visible {
				mark = "VISIBLE"
			}
			fmt.Fprintf(w, "  %s %s\n", mark, c.Path)
		}
	}
	if rep.Workspace != "" {
		fmt.Fprintf(w, "a run in %s:\n", rep.Workspace)
		for _, c := range rep.Checks {
			mark := map[string]string{checkOK: "ok  ", checkWarn: "WARN", checkFail: "FAIL"}[c.Status]
			fmt.Fprintf(w, "  %s %s: %s\n", mark, c.Name, c.Detail)
			if c.Fix != "" {
				fmt.Fprintf(w, "       fix: %s\n", c.Fix)
			}
		}
	}
	if rep.Problem != "" {
		fmt.Fprintf(w, "problem    %s\n", rep.Problem)
	}
}
