package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentos/agentos/kernel/workspace"
	"github.com/agentos/agentos/runtime/hooks"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/skills"
	"github.com/agentos/agentos/schemas"
	builtinskills "github.com/agentos/agentos/skills"
)

func skillsFlags(fs *flag.FlagSet) (repo *string, asJSON *bool) {
	return fs.String("repo", "", "repository whose .agent/skills and .claude/skills are listed too"),
		fs.Bool("json", false, "print JSON")
}

func cmdSkills(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "list" {
		return usageErrorf("usage: agentos skills list [--repo DIR] [--json]")
	}
	fs := flag.NewFlagSet("skills list", flag.ContinueOnError)
	repo, asJSON := skillsFlags(fs)
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("usage: agentos skills list [--repo DIR] [--json]")
	}
	roots := []skills.Root{{Name: "builtin", FS: builtinskills.FS}}
	if *repo != "" {
		ws, err := workspace.Open(*repo, workspace.Options{})
		if err != nil {
			return usageErrorf("%v", err)
		}
		defer ws.Close()
		roots = append(roots, skills.Root{Name: ".agent/skills", FS: ws.FS(), Dir: ".agent/skills"}, skills.Root{Name: ".claude/skills", FS: ws.FS(), Dir: ".claude/skills"})
	}
	reg, problems := skills.Discover(schemas.MustDefault(), roots...)
	if *asJSON {
		type item struct {
			Name         string   `json:"name"`
			Description  string   `json:"description"`
			Triggers     []string `json:"triggers"`
			AllowedTools []string `json:"allowed_tools"`
			Declared     []string `json:"declared_tools,omitempty"`
			// Rules: the entries whose argument binds calls
			// (Bash(git diff:*)); LeftOut: entries agentos cannot
			// enforce, which allow nothing.
			Rules   []string `json:"rules,omitempty"`
			LeftOut []string `json:"left_out,omitempty"`
			Root    string   `json:"root"`
		}
		out := struct {
			Skills  []item           `json:"skills"`
			Skipped []skills.Problem `json:"skipped"`
		}{Skills: []item{}, Skipped: problems}
		for _, s := range reg.List() {
			out.Skills = append(out.Skills, item{s.Name, s.Description, s.Triggers, s.AllowedTools, s.DeclaredTools, argumentRules(s), s.RuleProblems, s.Root})
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, s := range reg.List() {
		declared := ""
		if strings.Join(s.DeclaredTools, " ") != strings.Join(s.AllowedTools, " ") {
			declared = fmt.Sprintf(" (as written: %s)", strings.Join(s.DeclaredTools, ", "))
		}
		fmt.Fprintf(stdout, "%-10s %-15s %s\n           triggers: %v  allowed-tools: %v%s\n", s.Name, s.Root, s.Description, s.Triggers, s.AllowedTools, declared)
		if rules := argumentRules(s); len(rules) > 0 {
			fmt.Fprintf(stdout, "           rules: %s (calls must match them while the skill is loaded)\n", strings.Join(rules, ", "))
		}
		for _, p := range s.RuleProblems {
			fmt.Fprintf(stdout, "           left out, allows nothing: %s\n", p)
		}
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "skipped: %s\n", p)
	}
	return nil
}

// argumentRules are a skill's enforced allowed-tools entries with an
// argument: the permission rules its calls must match.
func argumentRules(s *skills.Skill) []string {
	var out []string
	for _, e := range s.ToolEntries {
		if strings.Contains(e, "(") {
			out = append(out, e)
		}
	}
	return out
}

func hooksFlags(fs *flag.FlagSet) (repo *string) {
	return fs.String("repo", ".", "repository whose .agent/settings.json and .claude/settings.json are used")
}

// cmdHooks fires one event's hooks from a repository's settings with the
// input JSON on stdin (Claude Code's hook input shape) and prints the
// decision, without recording anything.
func cmdHooks(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 || args[0] != "test" {
		return usageErrorf("usage: agentos hooks test EVENT [--repo DIR] < input.json")
	}
	fs := flag.NewFlagSet("hooks test", flag.ContinueOnError)
	repo := hooksFlags(fs)
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("usage: agentos hooks test EVENT [--repo DIR] < input.json")
	}
	ev := hooks.Event(pos[0])
	sb, err := setup.Sandbox(ctx, os.Getenv)
	if err != nil {
		return usageErrorf("%v", err)
	}
	ws, err := workspace.Open(*repo, workspace.Options{Sandbox: sb})
	if err != nil {
		return usageErrorf("%v", err)
	}
	defer ws.Close()
	reg := hooks.NewRegistry()
	reg.Builtins()
	notes, err := reg.LoadSettings(ws.FS(), hookRunner{WS: ws}, ".agent/settings.json", ".claude/settings.json")
	if err != nil {
		return &exitError{code: exitFailure, err: err}
	}
	for _, n := range notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	var in struct {
		SessionID string          `json:"session_id"`
		ToolName  string          `json:"tool_name"`
		ToolInput json.RawMessage `json:"tool_input"`
		ToolResp  json.RawMessage `json:"tool_response"`
		Prompt    string          `json:"prompt"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil && err != io.EOF {
		return usageErrorf("hooks test: stdin is not JSON: %v", err)
	}
	d, err := reg.Fire(ctx, nil, hooks.Input{Event: ev, SessionID: in.SessionID, Cwd: ws.Root(), ToolName: in.ToolName, ToolInput: in.ToolInput, ToolResponse: in.ToolResp, Prompt: in.Prompt})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return err
	}
	if d.Decision == hooks.Deny {
		return &exitError{code: exitBlocked, err: fmt.Errorf("denied by %s", d.Handler)}
	}
	return nil
}
