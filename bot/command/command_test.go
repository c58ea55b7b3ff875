package command

import (
	"slices"
	"strings"
	"testing"
)

func run(prompt string, line int) Result {
	return Result{Kind: Command, Command: Cmd{Name: Run, Prompt: prompt, Line: line}}
}

func cmd(n Name, line int) Result { return Result{Kind: Command, Command: Cmd{Name: n, Line: line}} }

func ignore(r Reason) Result { return Result{Kind: Ignore, Reason: string(r)} }

var help = Result{Kind: Help, Name: HelpCmd}

func TestParse(t *testing.T) {
	long := strings.Repeat("word ", 20000)
	cases := []struct {
		name    string
		body    string
		trigger string
		want    Result
	}{
		{"run", "/agent fix auth.ts", "", run("fix auth.ts", 1)},
		{"run trims", "/agent    fix auth.ts   ", "", run("fix auth.ts", 1)},
		{"tab after trigger", "/agent\tfix auth.ts", "", run("fix auth.ts", 1)},
		{"leading spaces", "   /agent fix it", "", run("fix it", 1)},
		// A tab (or four spaces) before the first line makes it an
		// indented code block, as GitHub shows it.
		{"leading tab is code", "\t/agent fix it", "", ignore(InCode)},
		{"four spaces are code", "    /agent fix it", "", ignore(InCode)},
		{"indented line in a paragraph", "thanks\n    /agent fix it", "", run("fix it", 2)},
		{"upper-case trigger", "/AGENT fix it", "", run("fix it", 1)},
		{"mixed-case trigger", "/Agent status", "", cmd(Status, 1)},
		{"upper-case subcommand", "/agent STATUS", "", cmd(Status, 1)},
		{"trigger glued to word", "/agentx fix it", "", ignore(NoTrigger)},
		{"trigger glued to punctuation", "/agent: fix it", "", ignore(NoTrigger)},
		{"trigger mid-line", "please /agent fix it", "", ignore(NoTrigger)},
		{"no command", "LGTM, thanks!", "", ignore(NoTrigger)},
		{"empty body", "", "", ignore(EmptyInput)},
		{"blank body", " \r\n\t ", "", ignore(EmptyInput)},
		{"bare trigger is help", "/agent", "", help},
		{"bare trigger with spaces is help", "  /agent   ", "", help},
		{"help", "/agent help", "", help},
		{"help words are a prompt", "/agent help me fix the login", "", run("help me fix the login", 1)},
		{"status", "/agent status", "", cmd(Status, 1)},
		{"cancel", "/agent cancel", "", cmd(Cancel, 1)},
		{"review", "/agent review", "", cmd(Review, 1)},
		{"review upper-case", "/agent REVIEW  ", "", cmd(Review, 1)},
		{"review with words is a prompt", "/agent review the auth code", "", run("review the auth code", 1)},
		{"triage", "Thanks!\n/agent triage", "", cmd(Triage, 2)},
		{"triage in code is ignored", "`/agent triage`", "", ignore(InCode)},
		{"triage with words is a prompt", "/agent triage this later", "", run("triage this later", 1)},
		{"cancel with words is a prompt", "/agent cancel the cron job", "", run("cancel the cron job", 1)},
		{"approve all implied", "/agent approve", "", Result{Kind: Command, Command: Cmd{Name: Approve, All: true, Line: 1}}},
		{"approve all", "/agent approve ALL", "", Result{Kind: Command, Command: Cmd{Name: Approve, All: true, Line: 1}}},
		{"approve id", "/agent approve ap-3f9c2a1b7d4e", "", Result{Kind: Command, Command: Cmd{Name: Approve, ApprovalID: "ap-3f9c2a1b7d4e", Line: 1}}},
		{"approve two args", "/agent approve ap-1 ap-2", "", Result{Kind: Invalid, Name: Approve, Reason: "`approve` takes one approval id or `all`, got ap-1 ap-2", Usage: "/agent approve [<id>|all]"}},
		{"approve bad id", "/agent approve <ap-1>", "", Result{Kind: Invalid, Name: Approve, Reason: "`<ap-1>` is not an approval id (letters, digits, `-`, `_`, `.`; at most 64)", Usage: "/agent approve [<id>|all]"}},
		{"approve id too long", "/agent approve " + strings.Repeat("a", 65), "", Result{Kind: Invalid, Name: Approve, Reason: "`" + strings.Repeat("a", 40) + "…` is not an approval id (letters, digits, `-`, `_`, `.`; at most 64)", Usage: "/agent approve [<id>|all]"}},
		{"deny id", "/agent deny ap-1", "", Result{Kind: Command, Command: Cmd{Name: Deny, ApprovalID: "ap-1", Line: 1}}},
		{"deny id reason", "/agent deny ap-1 do not touch   the lockfile ", "", Result{Kind: Command, Command: Cmd{Name: Deny, ApprovalID: "ap-1", DenyReason: "do not touch   the lockfile", Line: 1}}},
		{"deny without id", "/agent deny", "", Result{Kind: Invalid, Name: Deny, Reason: "`deny` needs the id of the approval to deny", Usage: "/agent deny <id> [reason]"}},
		{"deny all refused", "/agent deny all", "", Result{Kind: Invalid, Name: Deny, Reason: "`deny` answers one approval at a time: give its id", Usage: "/agent deny <id> [reason]"}},
		{"deny backtick id", "/agent deny `ap-1`", "", Result{Kind: Invalid, Name: Deny, Reason: "`'ap-1'` is not an approval id (letters, digits, `-`, `_`, `.`; at most 64)", Usage: "/agent deny <id> [reason]"}},
		{"CRLF", "Thanks!\r\n/agent fix it\r\n", "", run("fix it", 2)},
		{"CR only", "Thanks!\r/agent status\r", "", cmd(Status, 2)},
		{"CRLF bare trigger", "/agent\r\n", "", help},
		{"first of many commands", "/agent status\n/agent cancel", "", cmd(Status, 1)},
		{"first after prose", "hi\n\n/agent approve ap-9\n/agent deny ap-9", "", Result{Kind: Command, Command: Cmd{Name: Approve, ApprovalID: "ap-9", Line: 3}}},
		{"prompt continues in paragraph", "/agent fix the login:\n- keep the API\n- add a test\n\nthanks", "", run("fix the login:\n- keep the API\n- add a test", 1)},
		{"prompt stops at next command", "/agent fix it\n/agent status", "", run("fix it", 1)},
		{"prompt stops at fence", "/agent fix it\n```\ncode\n```", "", run("fix it", 1)},
		{"backtick fence", "```\n/agent fix it\n```", "", ignore(InCode)},
		{"tilde fence", "~~~\n/agent fix it\n~~~", "", ignore(InCode)},
		{"fence with info", "```go\n/agent fix it\n```\n", "", ignore(InCode)},
		{"indented fence", "  ```\n  /agent fix it\n  ```", "", ignore(InCode)},
		{"command after fence", "```\n/agent fix it\n```\n/agent status", "", cmd(Status, 4)},
		{"longer fence not closed by shorter", "````\n```\n/agent fix it\n````\n/agent cancel", "", cmd(Cancel, 5)},
		{"tilde not closed by backticks", "~~~\n```\n/agent fix it\n", "", ignore(InCode)},
		{"unclosed fence hides the rest", "```\n/agent fix it", "", ignore(InCode)},
		{"inline code line", "`/agent fix it`", "", ignore(InCode)},
		{"inline code mid-line", "Use `/agent help` to see commands", "", ignore(NoTrigger)},
		{"code span over lines", "see `foo\n/agent fix it\nbar` here", "", ignore(InCode)},
		{"unmatched backtick is literal", "a ` b\n/agent fix it", "", run("fix it", 2)},
		{"code span in prompt", "/agent rename `foo` to `bar`", "", run("rename `foo` to `bar`", 1)},
		{"quoted reply", "> /agent fix it\n\nI agree", "", ignore(InQuote)},
		{"nested quote", ">> /agent fix it", "", ignore(InQuote)},
		{"indented quote", "  > /agent status", "", ignore(InQuote)},
		// A line right after a quote continues it (lazy continuation):
		// GitHub shows it inside the quote.
		{"lazy quote continuation", "> /agent fix it\n/agent status", "", ignore(InQuote)},
		{"quote, blank line, command", "> /agent fix it\n\n/agent status", "", cmd(Status, 3)},
		{"quote in a list", "- > /agent fix it", "", ignore(InQuote)},
		{"list item is not a line start", "- /agent fix it", "", ignore(NoTrigger)},
		{"list item continuation", "- item\n  /agent fix it", "", run("fix it", 2)},
		{"html comment", "<!--\n/agent fix it\n-->", "", ignore(NoTrigger)},
		{"details block shows its text", "<details>\n/agent status\n</details>", "", cmd(Status, 2)},
		{"indented code after blank line", "text\n\n    /agent fix it", "", ignore(InCode)},
		{"fence inside a quote", "> ```\n> /agent fix it\n> ```", "", ignore(InCode)},
		{"code span opened by a longer run", "``a\n/agent fix ` it``", "", ignore(InCode)},
		{"prompt stops at quote", "/agent fix it\n> old text", "", run("fix it", 1)},
		{"unicode prompt", "/agent corrige l’accentuation de « café » 🚀", "", run("corrige l’accentuation de « café » 🚀", 1)},
		{"unicode space after trigger", "/agent\u00a0status", "", cmd(Status, 1)},
		{"unicode letter glued", "/agenté fix", "", ignore(NoTrigger)},
		{"very long prompt", "/agent " + long, "", run(strings.TrimSpace(long), 1)},
		{"command after long prose", strings.Repeat("lorem ipsum\n", 5000) + "/agent cancel", "", cmd(Cancel, 5001)},
		{"custom trigger", "/bot status", "/bot", cmd(Status, 1)},
		{"custom trigger ignores default", "/agent status", "/bot", ignore(NoTrigger)},
		{"mention trigger", "@agentos-bot fix it", "@agentos-bot", run("fix it", 1)},
	}
	if len(cases) < 40 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Parse(tc.body, tc.trigger)
			if got != tc.want {
				t.Errorf("Parse(%.60q)\n got %+v\nwant %+v", tc.body, got, tc.want)
			}
		})
	}
}

// TestParseWithTheCallersWords: the bare command words are the caller's.
// A word bare takes is a command alone and a request with more words; a
// word it does not take is a request, even one of the default set; help,
// approve and deny keep their grammar whatever bare says, run is never a
// word, and where a trigger holds no command (code, quotes) bare changes
// nothing.
func TestParseWithTheCallersWords(t *testing.T) {
	const deploy Name = "deploy"
	var asked []Name
	words := func(n Name) bool {
		asked = append(asked, n)
		return n == deploy || n == Status
	}
	every := func(n Name) bool {
		asked = append(asked, n)
		return true
	}
	cases := []struct {
		name  string
		body  string
		bare  func(Name) bool
		want  Result
		asked []Name // the words bare was asked about
	}{
		{"new word", "/agent deploy", words, cmd(deploy, 1), []Name{deploy}},
		{"new word upper-case", "Thanks\n/agent DEPLOY  ", words, cmd(deploy, 2), []Name{deploy}},
		{"new word with words is a prompt", "/agent deploy the staging site", words, run("deploy the staging site", 1), nil},
		{"new word followed by a line", "/agent deploy\nplease", words, cmd(deploy, 1), []Name{deploy}},
		{"default word the caller keeps", "/agent status", words, cmd(Status, 1), []Name{Status}},
		{"default word the caller does not take", "/agent cancel", words, run("cancel", 1), []Name{Cancel}},
		{"unknown word", "/agent rollback", words, run("rollback", 1), []Name{"rollback"}},
		{"new word in code", "`/agent deploy`", words, ignore(InCode), nil},
		{"new word quoted", "> /agent deploy", words, ignore(InQuote), nil},
		{"new word in a fence", "```\n/agent deploy\n```", words, ignore(InCode), nil},
		{"help is not asked", "/agent help", every, help, nil},
		{"bare trigger is help", "/agent", every, help, nil},
		{"approve keeps its grammar", "/agent approve", every, Result{Kind: Command, Command: Cmd{Name: Approve, All: true, Line: 1}}, nil},
		{"deny keeps its grammar", "/agent deny", every, Result{Kind: Invalid, Name: Deny, Reason: "`deny` needs the id of the approval to deny", Usage: "/agent deny <id> [reason]"}, nil},
		{"run is not a word", "/agent run", every, run("run", 1), nil},
		{"run with words", "/agent run the tests", every, run("run the tests", 1), nil},
		{"nil takes no word", "/agent status", nil, run("status", 1), nil},
		{"nil keeps help", "/agent help", nil, help, nil},
		{"nil keeps approve", "/agent approve ap-1", nil, Result{Kind: Command, Command: Cmd{Name: Approve, ApprovalID: "ap-1", Line: 1}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			got := ParseWith(tc.body, "", tc.bare)
			if got != tc.want {
				t.Errorf("ParseWith(%q)\n got %+v\nwant %+v", tc.body, got, tc.want)
			}
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("bare was asked %v, want %v", asked, tc.asked)
			}
		})
	}
	// A custom trigger takes the caller's words too.
	if got := ParseWith("/bot deploy", "/bot", words); got != cmd(deploy, 1) {
		t.Errorf("custom trigger: %+v", got)
	}
}

// TestParseIsParseWithTheDefaultWords: Parse's bare words are the default
// set, and only they.
func TestParseIsParseWithTheDefaultWords(t *testing.T) {
	for _, body := range []string{"/agent status", "/agent cancel", "/agent review", "/agent triage", "/agent deploy", "/agent run", "/agent help", "/agent approve", "/agent review the code", "> /agent status"} {
		if got, want := Parse(body, ""), ParseWith(body, "", defaultBare); got != want {
			t.Errorf("%q: Parse %+v, ParseWith the default words %+v", body, got, want)
		}
	}
	var words []Name
	for _, n := range []Name{Run, Approve, Deny, Status, Cancel, HelpCmd, Review, Triage, "deploy"} {
		if defaultBare(n) {
			words = append(words, n)
		}
	}
	if want := []Name{Status, Cancel, Review, Triage}; !slices.Equal(words, want) {
		t.Errorf("default bare words %v, want %v", words, want)
	}
}

// TestExamplesParseAsTheirCommand: every example the help shows parses
// as the command it illustrates.
func TestExamplesParseAsTheirCommand(t *testing.T) {
	for _, trigger := range []string{"", "/bot"} {
		want := trigger
		if want == "" {
			want = DefaultTrigger
		}
		for _, d := range Descriptions() {
			for _, e := range d.Examples {
				ex := strings.ReplaceAll(e, "{trigger}", want)
				r := Parse(ex, trigger)
				name := r.Command.Name
				if r.Kind == Help {
					name = HelpCmd
				}
				if name != d.Name {
					t.Errorf("example %q of %s parses as %+v", ex, d.Name, r)
				}
			}
		}
	}
}

func TestEveryCommandIsDescribed(t *testing.T) {
	for _, n := range []Name{Run, Approve, Deny, Status, Cancel, HelpCmd, Review, Triage} {
		d := lookup(n)
		if d.Summary == "" || len(d.Examples) == 0 {
			t.Errorf("%s is not fully described: %+v", n, d)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"/agent fix", "```\n/agent x\n```", "a `b\n/agent c` d", "> /agent", "/agent deny"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		r := Parse(body, "")
		if r.Kind == Command && r.Command.Name == Run && r.Command.Prompt == "" {
			t.Errorf("empty prompt for %q", body)
		}
		if r.Kind == Invalid && (r.Reason == "" || r.Usage == "") {
			t.Errorf("invalid without reason/usage for %q: %+v", body, r)
		}
	})
}
