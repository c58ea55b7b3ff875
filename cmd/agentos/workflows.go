package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/workflow"
	"github.com/agentos/agentos/schemas"
)

const workflowsUsage = "usage: agentos workflows list|validate [--repo DIR] [--json] | agentos workflows explain CYCLE [--repo DIR] | agentos workflows run CYCLE --repo DIR [--mode MODE] [--input NAME=FILE]... \"prompt\""

func workflowsFlags(fs *flag.FlagSet) (repo *string, asJSON *bool) {
	return fs.String("repo", "", "repository whose .agent/workflows adds to or overrides the built-in definitions"),
		fs.Bool("json", false, "print JSON")
}

// loadWorkflows loads the built-in plane plus the repository's. The
// repository is read through the workspace jail: nothing outside it is read.
func loadWorkflows(repo string) (*workflow.Registry, error) {
	sources := []workflow.Source{workflow.Builtin()}
	if repo != "" {
		ws, err := workspace.Open(repo, workspace.Options{})
		if err != nil {
			return nil, usageErrorf("%v", err)
		}
		defer ws.Close()
		sources = append(sources, workflow.Source{Name: workflow.RepoDir, FS: ws.FS(), Dir: workflow.RepoDir})
	}
	return workflow.Load(schemas.MustDefault(), sources...)
}

func cmdWorkflows(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageErrorf(workflowsUsage)
	}
	sub := args[0]
	if sub == "run" {
		return cmdWorkflowRun(ctx, args[1:], stdout, stderr)
	}
	if sub != "list" && sub != "validate" && sub != "explain" {
		return usageErrorf("unknown subcommand %q; %s", sub, workflowsUsage)
	}
	fs := flag.NewFlagSet("workflows "+sub, flag.ContinueOnError)
	repo, asJSON := workflowsFlags(fs)
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if (sub == "explain") != (len(pos) == 1) || len(pos) > 1 {
		return usageErrorf(workflowsUsage)
	}
	reg, err := loadWorkflows(*repo)
	var le *workflow.LoadError
	if errors.As(err, &le) {
		if *asJSON {
			_ = json.NewEncoder(stdout).Encode(struct {
				OK       bool               `json:"ok"`
				Problems []workflow.Problem `json:"problems"`
			}{false, le.Problems})
		} else {
			for _, p := range le.Problems {
				fmt.Fprintln(stdout, p.String())
			}
		}
		return &exitError{code: exitFailure, err: fmt.Errorf("workflows: %d problem(s); nothing loaded", len(le.Problems))}
	}
	if err != nil {
		return err
	}
	switch sub {
	case "validate":
		if *asJSON {
			return json.NewEncoder(stdout).Encode(struct {
				OK        bool                `json:"ok"`
				Problems  []workflow.Problem  `json:"problems"`
				Overrides []workflow.Override `json:"overrides"`
			}{true, []workflow.Problem{}, orEmpty(reg.Overrides())})
		}
		printOverrides(stdout, reg.Overrides())
		fmt.Fprintf(stdout, "ok: %d cycles, %d phases, %d policies, %d personas, %d artifacts\n",
			len(reg.Cycles()), len(reg.Phases()), len(reg.Policies()), len(reg.Personas()), len(reg.Artifacts()))
		return nil
	case "explain":
		c, err := reg.CycleForTrigger(pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(explainJSON(reg, c))
		}
		explainCycle(stdout, reg, c)
		return nil
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(listJSON(reg))
	}
	printOverrides(stdout, reg.Overrides())
	fmt.Fprintln(stdout, "cycles:")
	for _, c := range reg.Cycles() {
		fmt.Fprintf(stdout, "  %-20s %s  [%s]  %s\n", c.ID, strings.Join(c.Phases, " → "), c.Origin, c.Description)
	}
	fmt.Fprintln(stdout, "phases:")
	for _, p := range reg.Phases() {
		fmt.Fprintf(stdout, "  %-20s personas: %s  [%s]\n", p.ID, listOrDash(p.Personas), p.Origin)
	}
	fmt.Fprintln(stdout, "policies:")
	for _, p := range reg.Policies() {
		fmt.Fprintf(stdout, "  %-20s %s, %d rule(s), default %s  [%s]\n", p.ID, p.Kind, len(p.Rules), defaultOf(p), p.Origin)
	}
	fmt.Fprintln(stdout, "personas:")
	for _, p := range reg.Personas() {
		fmt.Fprintf(stdout, "  %-20s %s  [%s]\n", p.ID, p.Role, p.Origin)
	}
	fmt.Fprintln(stdout, "artifacts:")
	for _, a := range reg.Artifacts() {
		fmt.Fprintf(stdout, "  %-20s %s (%s)  [%s]\n", a.ID, a.Naming, a.Schema, a.Origin)
	}
	return nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func listOrDash(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}

func defaultOf(p *workflow.Policy) string {
	if p.Default == "" {
		return "deny (omitted)"
	}
	return string(p.Default)
}

func printOverrides(w io.Writer, ov []workflow.Override) {
	for _, o := range ov {
		fmt.Fprintf(w, "override: %s %s: %s replaces %s\n", o.Kind, o.ID, o.By, o.Overridden)
	}
}

func exprSrc(e *workflow.Expr) string {
	if e == nil {
		return "-"
	}
	return e.Source
}

// explainCycle prints a cycle as its phase graph.
func explainCycle(w io.Writer, reg *workflow.Registry, c *workflow.Cycle) {
	fmt.Fprintf(w, "cycle %s  [%s]\n", c.ID, c.Origin)
	if c.Description != "" {
		fmt.Fprintf(w, "  %s\n", c.Description)
	}
	fmt.Fprintf(w, "  entry: %s\n", c.EntryPhase)
	for i, id := range c.Phases {
		p, err := reg.Phase(id)
		if err != nil { // cannot happen in a loaded registry
			fmt.Fprintf(w, "  %d. %s: %v\n", i+1, id, err)
			continue
		}
		fmt.Fprintf(w, "  %d. %s\n", i+1, p.ID)
		var writers, reviewers []string
		for _, id := range p.Personas {
			if per, err := reg.Persona(id); err == nil && len(per.WritePaths) > 0 {
				writers = append(writers, fmt.Sprintf("%s (writes %s)", id, strings.Join(per.WritePaths, ", ")))
			} else {
				reviewers = append(reviewers, id)
			}
		}
		if len(writers) > 0 {
			fmt.Fprintf(w, "       persona passes: %s\n", strings.Join(writers, "; "))
		}
		if len(reviewers) > 0 {
			fmt.Fprintf(w, "       fan-out: %s → fan-in", strings.Join(reviewers, ", "))
			if p.MaxConcurrency > 0 {
				fmt.Fprintf(w, " (at most %d at a time)", p.MaxConcurrency)
			}
			fmt.Fprintln(w)
		} else if len(writers) == 0 {
			if isGate(reg, p) {
				fmt.Fprintln(w, "       gate: the policies decide on the fanned-in findings (no model call)")
			} else {
				fmt.Fprintln(w, "       one Plan-Work-Review pass")
			}
		}
		if len(p.Policies) > 0 {
			fmt.Fprintf(w, "       policies: %s\n", strings.Join(p.Policies, ", "))
		}
		fmt.Fprintf(w, "       advance when: %s\n", p.Advance.Source)
		if p.Halt != nil {
			fmt.Fprintf(w, "       halt when:    %s\n", p.Halt.Source)
		}
	}
	if c.LoopTo != "" {
		fmt.Fprintf(w, "  then: back to %s (next generation)\n", c.LoopTo)
	}
	fmt.Fprintf(w, "  done when:  %s\n", exprSrc(c.Done))
	fmt.Fprintf(w, "  abort when: %s\n", exprSrc(c.Abort))
	b := c.Bounds
	fmt.Fprintf(w, "  loop bounds: max_generations=%d max_oscillations=%d halt_on_grade_regression=%v\n", b.MaxGenerations, b.MaxOscillations, b.HaltOnGradeRegression)
	if len(c.Policies) > 0 {
		fmt.Fprintf(w, "  cycle policies: %s\n", strings.Join(c.Policies, ", "))
	}
}

type phaseJSON struct {
	ID             string   `json:"id"`
	Personas       []string `json:"agents_invoked"`
	MaxConcurrency int      `json:"max_concurrency,omitempty"`
	Advance        string   `json:"advance_signal"`
	Halt           string   `json:"halt_signal,omitempty"`
	Policies       []string `json:"policies"`
	Origin         string   `json:"origin"`
}

func phaseOut(p *workflow.Phase) phaseJSON {
	out := phaseJSON{ID: p.ID, Personas: orEmpty(p.Personas), MaxConcurrency: p.MaxConcurrency, Advance: p.Advance.Source, Policies: orEmpty(p.Policies), Origin: p.Origin.String()}
	if p.Halt != nil {
		out.Halt = p.Halt.Source
	}
	return out
}

func explainJSON(reg *workflow.Registry, c *workflow.Cycle) any {
	type cycleJSON struct {
		ID         string              `json:"id"`
		EntryPhase string              `json:"entry_phase"`
		Phases     []phaseJSON         `json:"phases"`
		LoopTo     string              `json:"loop_to,omitempty"`
		Done       string              `json:"done"`
		Abort      string              `json:"abort,omitempty"`
		Bounds     workflow.LoopBounds `json:"loop_bounds"`
		Policies   []string            `json:"policies"`
		Origin     string              `json:"origin"`
	}
	out := cycleJSON{ID: c.ID, EntryPhase: c.EntryPhase, Phases: []phaseJSON{}, LoopTo: c.LoopTo, Done: exprSrc(c.Done), Bounds: c.Bounds, Policies: orEmpty(c.Policies), Origin: c.Origin.String()}
	if c.Abort != nil {
		out.Abort = c.Abort.Source
	}
	for _, id := range c.Phases {
		if p, err := reg.Phase(id); err == nil {
			out.Phases = append(out.Phases, phaseOut(p))
		}
	}
	return out
}

func listJSON(reg *workflow.Registry) any {
	type entry struct {
		ID     string `json:"id"`
		Kind   string `json:"kind,omitempty"`
		Origin string `json:"origin"`
	}
	out := struct {
		Cycles    []entry             `json:"cycles"`
		Phases    []phaseJSON         `json:"phases"`
		Policies  []entry             `json:"policies"`
		Personas  []entry             `json:"personas"`
		Artifacts []entry             `json:"artifacts"`
		Overrides []workflow.Override `json:"overrides"`
	}{Cycles: []entry{}, Phases: []phaseJSON{}, Policies: []entry{}, Personas: []entry{}, Artifacts: []entry{}, Overrides: orEmpty(reg.Overrides())}
	for _, c := range reg.Cycles() {
		out.Cycles = append(out.Cycles, entry{c.ID, "", c.Origin.String()})
	}
	for _, p := range reg.Phases() {
		out.Phases = append(out.Phases, phaseOut(p))
	}
	for _, p := range reg.Policies() {
		out.Policies = append(out.Policies, entry{p.ID, p.Kind, p.Origin.String()})
	}
	for _, p := range reg.Personas() {
		out.Personas = append(out.Personas, entry{p.ID, p.Role, p.Origin.String()})
	}
	for _, a := range reg.Artifacts() {
		out.Artifacts = append(out.Artifacts, entry{a.ID, "", a.Origin.String()})
	}
	return out
}

// isGate mirrors the executor (runtime/workflow/cycle): a phase without
// personas that takes a review_aggregate_v1 or applies confidence-gating or
// severity-routing runs no model.
func isGate(reg *workflow.Registry, p *workflow.Phase) bool {
	if p.InputSchema == "review_aggregate_v1" {
		return true
	}
	for _, id := range p.Policies {
		if pol, err := reg.Policy(id); err == nil && (pol.Kind == workflow.KindConfidenceGating || pol.Kind == workflow.KindSeverityRouting) {
			return true
		}
	}
	return false
}
