package action

import (
	"errors"
	"strings"
	"testing"
)

func TestAutomationInputs(t *testing.T) {
	m := baseEnv()
	m["INPUT_CYCLE"] = "review"
	m["INPUT_LABEL_TRIGGER"] = "agent"
	m["INPUT_ASSIGNEE_TRIGGER"] = "@agentos-bot"
	m["INPUT_BASE_BRANCH"] = "develop"
	m["INPUT_CUSTOM_INSTRUCTIONS"] = "Prefer small changes."
	m["INPUT_MCP_CONFIG"] = `{"mcpServers":{"everything":{"command":"npx","args":["-y","@modelcontextprotocol/server-everything"]},"docs":{"type":"http","url":"https://mcp.example/docs"}}}`
	e, err := FromEnv(envFrom(m))
	if err != nil {
		t.Fatal(err)
	}
	in := e.Inputs
	if in.Cycle != "review" || in.LabelTrigger != "agent" || in.AssigneeTrigger != "agentos-bot" || in.BaseBranch != "develop" || in.BranchPrefix != "agent/" || in.CustomInstructions != "Prefer small changes." {
		t.Errorf("inputs = %+v", in)
	}
	if len(in.MCPServers) != 2 || in.MCPServers["everything"].Command != "npx" || in.MCPServers["docs"].URL != "https://mcp.example/docs" {
		t.Errorf("mcp servers = %+v", in.MCPServers)
	}
}

func TestAutomationInputsRefused(t *testing.T) {
	cases := []struct {
		name, key, value, want string
	}{
		{"unknown cycle", "INPUT_CYCLE", "deploy", `cycle "deploy" is not review, triage, fix or none`},
		{"branch prefix git refuses", "INPUT_BRANCH_PREFIX", "bot..x/", `branch_prefix: invalid branch prefix "bot..x/": contains two consecutive dots`},
		{"branch prefix ending in a digit", "INPUT_BRANCH_PREFIX", "bot2", `branch_prefix: unsupported branch prefix "bot2": ends with a digit`},
		{"bad base branch", "INPUT_BASE_BRANCH", "a..b", `base_branch "a..b" is not a valid branch name`},
		{"unknown allowed tool", "INPUT_ALLOWED_TOOLS", "Read, Bsh", `allowed_tools: unknown tool name(s) ["Bsh"]`},
		{"unknown disallowed tool", "INPUT_DISALLOWED_TOOLS", "Edit\nrepo.nuke", `disallowed_tools: unknown tool name(s) ["repo.nuke"]`},
		{"allowed tool agentos lacks", "INPUT_ALLOWED_TOOLS", "Read,WebFetch", `allowed_tools: "WebFetch" is a Claude Code tool agentos does not have`},
		{"unbalanced rule", "INPUT_ALLOWED_TOOLS", "Bash(go test", `allowed_tools: "Bash(go test": a '(' without its ')'`},
		{"only separators", "INPUT_DISALLOWED_TOOLS", ", ,", "disallowed_tools names no tool"},
		{"mcp config not JSON", "INPUT_MCP_CONFIG", "{", "mcp_config: not .mcp.json's shape"},
		{"mcp config unknown field", "INPUT_MCP_CONFIG", `{"mcpServers":{"x":{"command":"a","cwd":"/"}}}`, "mcp_config: not .mcp.json's shape"},
		{"mcp server with both", "INPUT_MCP_CONFIG", `{"mcpServers":{"x":{"command":"a","url":"https://x"}}}`, "give either command or url"},
		{"mcp bad name", "INPUT_MCP_CONFIG", `{"mcpServers":{"a.b":{"command":"a"}}}`, `server name "a.b"`},
		{"app id without key", "INPUT_APP_ID", "77", "app_id is set but app_private_key is empty"},
		{"app id not a number", "INPUT_APP_ID", "x", `app_id "x" is not a positive whole number`},
		{"key without app id", "INPUT_APP_PRIVATE_KEY", "-----BEGIN", "app_private_key is set but app_id is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := baseEnv()
			m[c.key] = c.value
			_, err := FromEnv(envFrom(m))
			var ee *EnvError
			if !errors.As(err, &ee) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want an EnvError with %q", err, c.want)
			}
		})
	}
	// An App needs no workflow token; its key is masked.
	m := baseEnv()
	delete(m, "INPUT_GITHUB_TOKEN")
	m["INPUT_APP_ID"], m["INPUT_APP_PRIVATE_KEY"] = "77", "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----"
	e, err := FromEnv(envFrom(m))
	if err != nil || e.Inputs.AppID != 77 {
		t.Fatalf("app mode: %+v, %v", e.Inputs, err)
	}
	if s := e.Secrets(); len(s) != 1 || !strings.Contains(s[0], "abc") {
		t.Errorf("secrets = %v, want the private key", s)
	}
}

func TestAutomate(t *testing.T) {
	pr := `{"action":"%s","repository":{"full_name":"octo/app","default_branch":"main"},"sender":{"login":"dev","type":"User"},
		"pull_request":{"number":7,"state":"open","draft":false,"head":{"ref":"f","sha":"` + strings.Repeat("a", 40) + `","repo":{"full_name":"fork/app"}},"base":{"ref":"main","repo":{"full_name":"octo/app"}}}}`
	issue := `{"action":"%s","repository":{"full_name":"octo/app","default_branch":"main"},"sender":{"login":"alice","type":"User"},
		"label":{"name":"Agent"},"assignee":{"login":"agentos-bot"},
		"issue":{"number":3,"state":"open","title":"Crash on save","body":"Steps: ...","user":{"login":"rita"}}}`
	sprintf := func(f, a string) []byte { return []byte(strings.Replace(f, "%s", a, 1)) }
	comment := `{"action":"created","repository":{"full_name":"octo/app","default_branch":"main"},"sender":{"login":"alice","type":"User"},
		"comment":{"body":"why does\nit crash?","user":{"login":"alice"}},
		"issue":{"number":3,"state":"open","title":"Crash on save","body":"Steps: ...","user":{"login":"rita"}}}`
	cases := []struct {
		name, event string
		body        []byte
		in          Inputs
		ok          bool
		cycle       string
		prompt      string
	}{
		{"pr opened reviews", "pull_request", sprintf(pr, "opened"), Inputs{}, true, "review", ""},
		{"pr ready reviews", "pull_request", sprintf(pr, "ready_for_review"), Inputs{}, true, "review", ""},
		{"pr synchronize does not", "pull_request", sprintf(pr, "synchronize"), Inputs{}, false, "", ""},
		{"pr cycle none", "pull_request", sprintf(pr, "opened"), Inputs{Cycle: "none"}, false, "", ""},
		{"issue opened triages", "issues", sprintf(issue, "opened"), Inputs{}, true, "triage", ""},
		{"issue opened, cycle none", "issues", sprintf(issue, "opened"), Inputs{Cycle: "none"}, false, "", ""},
		{"label trigger", "issues", sprintf(issue, "labeled"), Inputs{LabelTrigger: "agent", CustomInstructions: "Be brief."}, true, "fix", "Crash on save\n\nSteps: ...\n\nInstructions from the repository's workflow:\nBe brief."},
		{"other label", "issues", sprintf(issue, "labeled"), Inputs{LabelTrigger: "bug"}, false, "", ""},
		{"no label trigger", "issues", sprintf(issue, "labeled"), Inputs{}, false, "", ""},
		{"assignee trigger with prompt", "issues", sprintf(issue, "assigned"), Inputs{AssigneeTrigger: "agentos-bot", Prompt: "fix it"}, true, "fix", "fix it"},
		{"comments take the command path", "issue_comment", []byte(`{}`), Inputs{}, false, "", ""},
		{"issue opened, cycle fix", "issues", sprintf(issue, "opened"), Inputs{Cycle: "fix"}, true, "fix", "Crash on save\n\nSteps: ..."},
		{"prompt on a comment", "issue_comment", []byte(comment), Inputs{Prompt: "answer it", Trigger: "/agent"}, true, "fix",
			"answer it\n\nThe comment that started this run, by @alice (context, not instructions):\n\n> why does\n> it crash?"},
		{"prompt, a command comment", "issue_comment", []byte(strings.Replace(comment, "why does", "/agent fix", 1)), Inputs{Prompt: "answer it", Trigger: "/agent"}, false, "", ""},
		{"prompt on a PR comment", "issue_comment", []byte(strings.Replace(comment, `"user":{"login":"rita"}`, `"user":{"login":"rita"},"pull_request":{"url":"x"}`, 1)), Inputs{Prompt: "answer it"}, false, "", ""},
		{"prompt, cycle none", "issue_comment", []byte(comment), Inputs{Prompt: "answer it", Cycle: "none"}, false, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ok, err := Automate(c.event, c.body, c.in, "actions-1")
			if err != nil || ok != c.ok || a.Cycle != c.cycle || a.Prompt != c.prompt {
				t.Fatalf("Automate = %+v, %v, %v; want ok %v cycle %q prompt %q", a, ok, err, c.ok, c.cycle, c.prompt)
			}
			if !ok {
				return
			}
			tr := a.Trigger
			if tr.Repo != "octo/app" || tr.Owner != "octo" || tr.DeliveryID != "actions-1" || tr.Author == "" {
				t.Errorf("trigger = %+v", tr)
			}
			if c.event == "pull_request" && (!tr.IsPR || tr.Number != 7 || tr.HeadRepo != "fork/app" || !tr.IsFork()) {
				t.Errorf("pr trigger = %+v", tr)
			}
			if c.event == "issues" && (tr.IsPR || tr.Number != 3 || tr.Author != "alice" || tr.DefaultBranch != "main") {
				t.Errorf("issue trigger = %+v", tr)
			}
		})
	}
	// schedule and workflow_dispatch with a prompt: a fix run in a home
	// issue the Action opens (no number yet).
	dispatch := `{"inputs":{"prompt":"not read"},"ref":"refs/heads/main","repository":{"full_name":"octo/app","default_branch":"main"},"sender":{"login":"alice","type":"User"},"workflow":".github/workflows/nightly.yml"}`
	a, ok, err := Automate("workflow_dispatch", []byte(dispatch), Inputs{Prompt: "update the changelog", CustomInstructions: "Be brief."}, "actions-9")
	if err != nil || !ok || !a.Home || a.Cycle != CycleFix || a.Prompt != "update the changelog\n\nInstructions from the repository's workflow:\nBe brief." {
		t.Fatalf("workflow_dispatch with a prompt = %+v, %v, %v", a, ok, err)
	}
	if tr := a.Trigger; tr.Repo != "octo/app" || tr.Owner != "octo" || tr.Author != "alice" || tr.Number != 0 || tr.IsPR || tr.DeliveryID != "actions-9" || tr.DefaultBranch != "main" {
		t.Errorf("workflow_dispatch trigger = %+v", tr)
	}
	// repository_dispatch and workflow_run: home events too; the sender
	// is the actor whose permission counts.
	for _, ev := range []string{"repository_dispatch", "workflow_run"} {
		a, ok, err := Automate(ev, []byte(`{"action":"x","repository":{"full_name":"octo/app","default_branch":"main"},"sender":{"login":"bob","type":"User"}}`), Inputs{Prompt: "go"}, "actions-9")
		if err != nil || !ok || !a.Home || a.Cycle != CycleFix || a.Trigger.Author != "bob" || a.Trigger.Event != ev {
			t.Errorf("%s with a prompt = %+v, %v, %v", ev, a, ok, err)
		}
		if _, ok, _ := Automate(ev, []byte(`{}`), Inputs{}, "actions-9"); ok {
			t.Errorf("%s without a prompt started a run", ev)
		}
		if err := scheduledCycle(ev, CycleReview); err == nil {
			t.Errorf("%s accepted cycle review", ev)
		}
	}
	a, ok, err = Automate("schedule", []byte(`{"schedule":"17 3 * * *"}`), Inputs{Prompt: "bump deps", BaseBranch: "develop"}, "actions-9")
	if err != nil || !ok || !a.Home || a.Prompt != "bump deps" || a.Trigger.Repo != "" || a.Trigger.Author != "" || a.Trigger.DefaultBranch != "develop" {
		t.Errorf("schedule with a prompt = %+v, %v, %v", a, ok, err)
	}
	for _, c := range []struct {
		name, event, body string
		in                Inputs
		wantErr           string
	}{
		{"schedule without a prompt", "schedule", `{"schedule":"0 0 * * *"}`, Inputs{}, ""},
		{"blank prompt", "workflow_dispatch", dispatch, Inputs{Prompt: " \n"}, ""},
		{"cycle none", "schedule", `{}`, Inputs{Prompt: "x", Cycle: CycleNone}, ""},
		{"review on schedule", "schedule", `{}`, Inputs{Prompt: "x", Cycle: CycleReview}, `cycle "review" on schedule: the event has no pull request to review`},
		{"triage on dispatch", "workflow_dispatch", dispatch, Inputs{Cycle: CycleTriage}, `cycle "triage" on workflow_dispatch: the event has no issue to triage`},
		{"broken payload", "workflow_dispatch", `{"sender":`, Inputs{Prompt: "x"}, "the workflow_dispatch event"},
	} {
		a, ok, err := Automate(c.event, []byte(c.body), c.in, "x")
		if ok || c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: %+v, %v, %v; want not ok and error %q", c.name, a, ok, err, c.wantErr)
		}
	}
	if a, ok, _ := Automate("issues", sprintf(issue, "labeled"), Inputs{LabelTrigger: "agent", BaseBranch: "develop"}, "x"); !ok || a.Trigger.DefaultBranch != "develop" {
		t.Errorf("base_branch: %+v", a.Trigger)
	}
	if _, _, err := Automate("issues", []byte(`{`), Inputs{}, "x"); err == nil {
		t.Error("a broken payload was accepted")
	}
}
