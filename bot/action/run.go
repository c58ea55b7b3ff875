package action

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/tracking"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/worktree"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/sqlite"
)

// Deps are what the Action needs from the program: how to build a run
// engine on a worktree (the provider registry lives in cmd).
type Deps struct {
	// Engines returns the engine builder for session worktrees over the
	// run's store.
	Engines func(st store.Store) dispatch.Engines
	// Sealer seals events (with the secrets to redact registered).
	Sealer *event.Sealer
	// GitBaseURL overrides where git is served (default GITHUB_SERVER_URL).
	GitBaseURL string
	// GitToken overrides the token for git over HTTPS (default the
	// github_token input).
	GitToken string
}

// Run handles the event that started the workflow run: it answers
// exactly as the webhook server would, with the session's log on the
// artifact branch as the only state. A pause for approval is a success.
// It writes the outputs and the step summary and returns the outputs.
func Run(ctx context.Context, env Env, deps Deps, log io.Writer) (Outputs, error) {
	for _, s := range env.Secrets() {
		Mask(log, s)
	}
	body, err := os.ReadFile(env.EventPath)
	if err != nil {
		return Outputs{}, fmt.Errorf("read the event: %w", err)
	}
	t, ok, err := webhook.Normalize(env.EventName, fmt.Sprintf("actions-%s", env.RunID), body)
	if err != nil {
		return Outputs{}, fmt.Errorf("the %s event: %w", env.EventName, err)
	}
	if !ok {
		out := Outputs{Status: "ignored"}
		fmt.Fprintf(log, "agentos: nothing to do for %s\n", env.EventName)
		return out, finish(env, out, SummaryInput{Outputs: out, Event: env.EventName})
	}
	if t.Repo == "" {
		t.Repo = env.Repository
	}
	if !strings.EqualFold(t.Repo, env.Repository) {
		return Outputs{}, fmt.Errorf("the event is about %s, but this workflow runs in %s", t.Repo, env.Repository)
	}
	client, err := github.New(github.Config{BaseURL: env.APIURL, Token: env.Token})
	if err != nil {
		return Outputs{}, err
	}
	botLogin := env.Inputs.BotLogin
	data := filepath.Join(env.RunnerTemp, "agentos")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return Outputs{}, err
	}
	st, err := sqlite.Open(data, deps.Sealer, sqlite.Options{})
	if err != nil {
		return Outputs{}, err
	}
	defer st.Close()
	gitBase := deps.GitBaseURL
	if gitBase == "" {
		gitBase = env.ServerURL
	}
	token := env.Token
	if deps.GitToken != "" {
		token = deps.GitToken
	}
	wm, err := worktree.New(worktree.Config{
		CacheDir:       filepath.Join(data, "git"),
		BaseURL:        gitBase,
		Token:          func(context.Context, worktree.Repo) (string, error) { return token, nil },
		Author:         worktree.Identity{Name: botLogin, Email: "41898282+github-actions[bot]@users.noreply.github.com"},
		ArtifactBranch: env.Inputs.ArtifactBranch,
	})
	if err != nil {
		return Outputs{}, err
	}
	var res dispatch.Result
	d := &dispatch.Dispatcher{
		Trigger:   env.Inputs.Trigger,
		BotLogin:  botLogin,
		GitHub:    dispatch.API{Client: client},
		Auth:      auth.New(client, auth.Policy{AllowedUsers: env.Inputs.AllowedUsers, BotLogin: botLogin}),
		Git:       dispatch.Worktrees{M: wm, Branch: env.Inputs.ArtifactBranch, OnSessionBranch: env.Inputs.LogOnSessionBranch},
		Runs:      run.NewManager(st),
		Engines:   deps.Engines(st),
		ServerURL: env.ServerURL,
		Result:    func(r dispatch.Result) { res = r },
	}
	end := Group(log, fmt.Sprintf("agentos: %s on %s#%d by %s", env.EventName, t.Repo, t.Number, t.Author))
	derr := d.Dispatch(ctx, t)
	end()
	out := Outputs{SessionID: res.SessionID, Status: res.Status, PRNumber: res.PR, Branch: res.Branch,
		InputTokens: res.Spent.InputTokens, OutputTokens: res.Spent.OutputTokens, CostUSD: res.Spent.CostUSD}
	if out.Status == "" {
		out.Status = res.Outcome
	}
	sum := SummaryInput{Outputs: out, Event: env.EventName, Reason: res.Reason, LogURL: res.LogURL}
	if res.SessionID != "" {
		fillSummary(ctx, st, res.SessionID, &sum)
		if out.Status == "" {
			out.Status = sum.Outputs.Status
		}
	}
	if derr != nil {
		if errors.Is(derr, dispatch.ErrTamperedLog) {
			Errorf(log, "refusing session %s: %v", res.SessionID, derr)
		} else {
			Errorf(log, "%v", derr)
		}
		sum.Reason = "Failed: " + derr.Error()
		return out, errors.Join(derr, finish(env, out, sum))
	}
	fmt.Fprintf(log, "agentos: session %s is %s\n", out.SessionID, out.Status)
	return out, finish(env, out, sum)
}

func finish(env Env, out Outputs, sum SummaryInput) error {
	sum.Outputs = out
	return errors.Join(WriteOutputs(env.OutputPath, out.Pairs()), AppendSummary(env.Summary, Summary(sum)))
}

// fillSummary adds the plan, tool calls, tests and approvals from the log,
// read through the same view the tracking comment renders.
func fillSummary(ctx context.Context, st store.Store, sid string, sum *SummaryInput) {
	evs, err := st.Read(ctx, sid, 1)
	if err != nil || len(evs) == 0 {
		return
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return
	}
	if snap.Terminal != nil && sum.Reason == "" {
		sum.Reason = snap.Terminal.Reason
	}
	v := tracking.ViewFromSnapshot(snap, tracking.Options{})
	for _, s := range v.Plan {
		sum.Plan = append(sum.Plan, s.Description)
	}
	for _, t := range v.Tests {
		line := "`" + t.Command + "`: " + t.Result
		if t.Detail != "" {
			line += " (" + t.Detail + ")"
		}
		sum.Tests = append(sum.Tests, line)
	}
	sum.Tools = map[string]int{}
	for _, c := range snap.ToolsInvoked {
		sum.Tools[c.Tool]++
	}
	for _, a := range snap.ResolvedApprovals {
		sum.Approvals = append(sum.Approvals, fmt.Sprintf("`%s` %s: %s by %s", a.ID, a.Tool, a.Decision, a.By))
	}
	for _, a := range snap.PendingApprovals {
		sum.Approvals = append(sum.Approvals, fmt.Sprintf("`%s` %s: waiting for a maintainer", a.ID, a.Tool))
	}
	sort.Strings(sum.Approvals)
}
