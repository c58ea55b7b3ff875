package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	botdemo "github.com/agentos/agentos/bot/demo"
	"github.com/agentos/agentos/runtime/demo"
	"github.com/agentos/agentos/runtime/provider"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/workflow/cycle"
	"github.com/agentos/agentos/schemas"
)

func demoFlags(fs *flag.FlagSet) (out *string, ask, onGitHub *bool) {
	return fs.String("out", "", "directory for the sample repository, the store and events.jsonl (default: a new temporary directory)"),
		fs.Bool("ask", false, "ask on the terminal before approving the patch"),
		fs.Bool("github", false, "play the bot's scenario instead: an issue comment, a draft PR and an Approve review on a fake GitHub (loopback only, needs git)")
}

// cmdDemo runs the bundled sample: plan, propose a patch (approval
// auto-granted, or asked on a terminal with --ask), apply it, run the tests,
// and print the trace and replay snapshot. The session log is written as
// events.jsonl in the output directory and verified.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	out, ask, onGitHub := demoFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("usage: agentos demo [--out DIR] [--ask | --github]")
	}
	if *onGitHub && *ask {
		return usageErrorf("demo: --ask and --github do not go together (on GitHub the maintainer answers with a review)")
	}
	if *out == "" {
		d, err := os.MkdirTemp("", "agentos-demo-")
		if err != nil {
			return err
		}
		*out = d
	}
	if *onGitHub {
		return demoGitHub(ctx, *out, stdout, stderr)
	}
	repo := filepath.Join(*out, "repo")
	if _, err := os.Stat(repo); err == nil {
		return usageErrorf("demo: %s already exists; choose an empty --out", repo)
	}
	if err := demo.WriteSample(repo); err != nil {
		return err
	}
	script, err := demo.Script()
	if err != nil {
		return err
	}
	prof := provider.DefaultProfile()
	prof.Model, prof.Script = "scripted-demo", "embedded"
	prof.Pricing = provider.Pricing{InputPerMTok: 3, OutputPerMTok: 15}
	data := filepath.Join(*out, "data")
	const sid = "demo-fix-auth"
	env, err := buildRuntime(ctx, envOptions{repo: repo, dataDir: data, profile: prof, script: script, sessionID: sid})
	if err != nil {
		return err
	}
	defer env.Close()
	// The request runs as the workflow plane's fix cycle, as `/agent fix`
	// does on GitHub: the trace shows the cycle's workflow events.
	if env.workflows == nil {
		return fmt.Errorf("demo: the workflow plane did not load: %s", strings.Join(env.notes, "; "))
	}
	start, err := env.workflows.StartRequest(cycle.Request{SessionID: sid, Cycle: "fix", Prompt: demo.Prompt, SessionKey: "demo", Mode: cycle.ModeInteractive, Cwd: env.ws.Root()})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "agentos demo: %q on a sample Go module in %s (workflow cycle %s)\n\n", demo.Prompt, repo, "fix")
	stop := watchProgress(ctx, env, sid, stdout)
	res, err := env.mgr.Start(ctx, env.engine, start)
	stop(err == nil)
	if err != nil {
		return err
	}
	for res.Status == "paused" {
		p := res.Pending[0]
		var preview struct {
			Diff    string `json:"diff"`
			Command string `json:"command"`
		}
		_ = json.Unmarshal(p.Preview, &preview)
		fmt.Fprintf(stdout, "\nThe run paused: %s needs approval (id %s, digest %.12s…).\n", p.Tool, p.ApprovalID, p.Digest)
		if preview.Diff != "" {
			fmt.Fprintf(stdout, "\n%s\n", indent(preview.Diff))
		}
		if preview.Command != "" {
			fmt.Fprintf(stdout, "\n    $ %s\n", preview.Command)
		}
		decision := "approve"
		if *ask {
			fmt.Fprint(stdout, "Approve? [y/N] ")
			line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
			if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(line)), "y") {
				decision = "deny"
			}
		} else {
			fmt.Fprintln(stdout, "Approving (the demo approves automatically; use --ask to decide yourself).")
		}
		if err := env.mgr.Resolve(ctx, sid, p.ApprovalID, decision, "demo-maintainer", "answered in the demo"); err != nil {
			return err
		}
		stop := watchProgress(ctx, env, sid, stdout)
		res, err = env.mgr.Resume(ctx, env.engine, sid, env.ws.Root(), "")
		stop(err == nil)
		if err != nil {
			return err
		}
	}
	logPath := filepath.Join(*out, "events.jsonl")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	evs, err := env.store.Read(ctx, sid, 1)
	if err != nil {
		f.Close()
		return err
	}
	for i := range evs {
		f.Write(append(evs[i].Line(), '\n'))
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nEvent trace:")
	printTrace(stdout, evs)
	snap, err := replay.Replay(evs)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "\nReplay snapshot:")
	printSnapshot(stdout, snap)
	lf, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	rep, err := replay.VerifyReader(schemas.MustDefault(), lf)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nSession log: %s (%d events; agentos verify: %s)\n", logPath, rep.Events, map[bool]string{true: "OK", false: "INVALID " + fmt.Sprint(rep.Problem)}[rep.Valid])
	fmt.Fprintf(stdout, "Sample repository after the run: %s (go test ./... passes there now)\n", repo)
	fmt.Fprintf(stdout, "See the run as a page (timeline, approval diff, cost): agentos view %s\n", logPath)
	if !rep.Valid {
		return &exitError{code: exitFailure, err: fmt.Errorf("the demo's log does not verify: %v", rep.Problem)}
	}
	if res.Status != "completed" {
		return &exitError{code: exitFailure, err: fmt.Errorf("the demo run ended %s", res.Status)}
	}
	return nil
}

// demoGitHub runs `agentos demo --github` (see bot/demo): the bot's
// scenario against a fake GitHub and a local git host, printed as a
// maintainer would see it.
func demoGitHub(ctx context.Context, out string, stdout, stderr io.Writer) error {
	// Any error, a failed scenario (botdemo.ErrFailed) included, exits 1.
	_, err := botdemo.Run(ctx, botdemo.Options{Dir: out, Out: stdout, Log: stderr})
	if errors.Is(err, botdemo.ErrDirNotEmpty) {
		return usageErrorf("%v", err)
	}
	return err
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
