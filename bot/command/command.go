// Package command owns the comment-command language of the bot: it turns
// the body of a GitHub comment into at most one command (`/agent <prompt>`,
// `/agent approve`, `/agent deny`, `/agent help`, and the bare command
// words: by default `/agent status`, `/agent cancel`, `/agent review` and
// `/agent triage`, or the caller's, see ParseWith), and describes the
// commands for the help text. It is pure: no I/O, no GitHub types, no authorization —
// who may run a command is described here and enforced by the caller.
package command

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	gmtext "github.com/yuin/goldmark/text"
)

// DefaultTrigger is the word that starts a command unless configured otherwise.
const DefaultTrigger = "/agent"

// Kind says what a comment asks of the bot.
type Kind int

const (
	// Ignore: the comment holds no command for the bot; say nothing.
	Ignore Kind = iota
	// Help: show the help text (`/agent help` or a bare `/agent`).
	Help
	// Command: run Result.Command.
	Command
	// Invalid: the comment addresses the bot but the command is malformed;
	// reply with Result.Reason and Result.Usage.
	Invalid
)

func (k Kind) String() string {
	switch k {
	case Ignore:
		return "ignore"
	case Help:
		return "help"
	case Command:
		return "command"
	case Invalid:
		return "invalid"
	}
	return "unknown"
}

// Name identifies a command.
type Name string

// The commands.
const (
	Run     Name = "run"
	Approve Name = "approve"
	Deny    Name = "deny"
	Status  Name = "status"
	Cancel  Name = "cancel"
	HelpCmd Name = "help"
	// Review runs the review cycle on a pull request: personas review the
	// diff and the findings come back as one PR review with line comments.
	Review Name = "review"
	// Triage runs the triage cycle on an issue: labels and a summary
	// comment, applied as far as policy allows.
	Triage Name = "triage"
)

// Reason says why a comment was ignored (Kind Ignore); it is meant for logs
// and metrics, not for the user.
type Reason string

// Reasons for Ignore.
const (
	NoTrigger  Reason = "no command"
	InCode     Reason = "command inside a code block or code span"
	InQuote    Reason = "command inside a quoted reply"
	EmptyInput Reason = "empty comment"
)

// Cmd is a parsed command.
type Cmd struct {
	Name Name
	// Prompt is the user's request for Run: the rest of the trigger line
	// and the following lines of the same paragraph, trimmed.
	Prompt string
	// ApprovalID is the approval answered by Approve (empty with All) or
	// Deny.
	ApprovalID string
	// All is set by `approve` without an id or with `all`.
	All bool
	// DenyReason is the optional free text after the id of Deny.
	DenyReason string
	// Line is the 1-based line of the comment the command starts on.
	Line int
}

// Result is the outcome of Parse.
type Result struct {
	Kind    Kind
	Command Cmd // Kind Command
	// Reason: for Ignore, one of the Reason constants; for Invalid, a
	// sentence that can be shown to the user as is.
	Reason string
	// Usage is the usage line of the malformed command (Kind Invalid).
	Usage string
	// Name is the command a Help or Invalid result is about (Invalid:
	// approve or deny).
	Name Name
}

// Parse finds the first command in a comment body, with the default bare
// command words (status, cancel, review, triage): it is ParseWith with
// those. trigger is the command word ("" means DefaultTrigger); it is
// matched case-insensitively and must start a line (after optional
// whitespace) and be followed by whitespace or the end of the line. The
// body is read as Markdown, the way GitHub renders it (goldmark,
// CommonMark): a trigger in a code block (fenced or indented), in a code
// span, in a block quote (lazy continuation lines included) or in an HTML
// comment never holds a command. Only the first command of a comment
// counts.
func Parse(body, trigger string) Result {
	return ParseWith(body, trigger, defaultBare)
}

// defaultBare reports whether n is a bare command word of the default set:
// the words bot/dispatch's route table routes without arguments.
func defaultBare(n Name) bool {
	switch n {
	case Status, Cancel, Review, Triage:
		return true
	}
	return false
}

// ParseWith is Parse with the caller's bare command words: bare reports
// whether a word (lower-cased) is a command when it is written alone after
// the trigger, as `/agent status` is. A bare word with more words after it
// ("review the auth code") is a request in free text, as is a word bare
// does not take; so the caller that routes commands (bot/dispatch's route
// table) says which words are commands, and a new one needs no rule here.
// The words with a grammar of their own are this package's and bare is
// not asked about them: help (and a bare trigger) is Help, approve and
// deny take their arguments (parseApprove, parseDeny), and run is never a
// word: a request in free text is Run. A nil bare takes no word.
func ParseWith(body, trigger string, bare func(Name) bool) Result {
	if bare == nil {
		bare = func(Name) bool { return false }
	}
	if trigger == "" {
		trigger = DefaultTrigger
	}
	if strings.TrimSpace(body) == "" {
		return Result{Kind: Ignore, Reason: string(EmptyInput)}
	}
	d := read(body)
	ignored := NoTrigger
	for i := range d.lines {
		l := d.lines[i]
		switch {
		case l.kind == codeLine:
			if startsWithTrigger(strings.TrimLeft(d.text(l.start), "`~ \t"), trigger) {
				ignored = InCode
			}
			continue
		case l.kind != textLine:
			continue
		}
		at := d.text(l.start)
		if d.inSpan(l.start) || strings.HasPrefix(at, "`") {
			if startsWithTrigger(strings.TrimLeft(at, "`"), trigger) {
				ignored = InCode
			}
			continue
		}
		if l.quoted {
			if startsWithTrigger(at, trigger) {
				ignored = InQuote
			}
			continue
		}
		// A trigger after a list marker or other text does not start
		// the line.
		if !l.first || !startsWithTrigger(at, trigger) {
			continue
		}
		rest := strings.TrimSpace(at[len(trigger):])
		// A free-text prompt continues over the next lines up to a blank
		// line, a code block, a quote or another command; a list that
		// follows the trigger line is part of the request.
		var more []string
		for _, next := range d.lines[i+1:] {
			if next.kind != textLine || next.quoted || (!d.inSpan(next.start) && startsWithTrigger(d.text(next.start), trigger)) {
				break
			}
			more = append(more, strings.TrimSpace(d.line(next.start)))
		}
		return parseCommand(rest, more, i+1, trigger, bare)
	}
	return Result{Kind: Ignore, Reason: string(ignored)}
}

// doc is a comment body read as Markdown: what each line is, as far as
// finding commands goes.
type doc struct {
	src   []byte // the body with \r\n and \r turned into \n
	ends  []int  // offset of each line's \n (or len(src))
	lines []lineInfo
	spans [][2]int // code spans' contents, [start, stop)
}

type lineKind uint8

const (
	otherLine lineKind = iota // blank, a fence, a rule, HTML ...
	textLine                  // a line of a paragraph or heading
	codeLine                  // inside a code block
)

type lineInfo struct {
	kind lineKind
	// start is the offset of the line's text in its block (after
	// indentation, list markers and quote markers).
	start int
	// first: only whitespace precedes start on the source line.
	first bool
	// quoted: the block is inside a block quote.
	quoted bool
}

func read(body string) *doc {
	body = strings.ReplaceAll(body, "\r\n", "\n")
	body = strings.ReplaceAll(body, "\r", "\n")
	d := &doc{src: []byte(body)}
	for i, c := range d.src {
		if c == '\n' {
			d.ends = append(d.ends, i)
		}
	}
	d.ends = append(d.ends, len(d.src))
	d.lines = make([]lineInfo, len(d.ends))
	root := goldmark.DefaultParser().Parse(gmtext.NewReader(d.src))
	_ = ast.Walk(root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.FencedCodeBlock, *ast.CodeBlock:
			d.mark(n.Lines(), codeLine, false)
			return ast.WalkSkipChildren, nil
		case *ast.HTMLBlock:
			// An HTML comment is not shown; other HTML blocks show
			// their text, so a line of them may hold a command.
			if n.HTMLBlockType != ast.HTMLBlockType2 {
				d.mark(n.Lines(), textLine, quoted(n))
			}
			return ast.WalkSkipChildren, nil
		case *ast.CodeSpan:
			start, stop := -1, -1
			for c := n.FirstChild(); c != nil; c = c.NextSibling() {
				if t, ok := c.(*ast.Text); ok {
					if start < 0 {
						start = t.Segment.Start
					}
					stop = t.Segment.Stop
				}
			}
			if start >= 0 {
				d.spans = append(d.spans, [2]int{start, stop})
			}
			return ast.WalkSkipChildren, nil
		}
		if n.Type() == ast.TypeBlock && (n.Kind() == ast.KindParagraph || n.Kind() == ast.KindTextBlock || n.Kind() == ast.KindHeading) {
			d.mark(n.Lines(), textLine, quoted(n))
		}
		return ast.WalkContinue, nil
	})
	return d
}

// mark records the lines of one block.
func (d *doc) mark(segs *gmtext.Segments, kind lineKind, quoted bool) {
	for k := 0; k < segs.Len(); k++ {
		start := segs.At(k).Start
		i := d.lineOf(start)
		if d.lines[i].kind != otherLine {
			continue // the first block that claims a line keeps it
		}
		d.lines[i] = lineInfo{kind: kind, start: start, quoted: quoted,
			first: strings.TrimSpace(string(d.src[d.lineStart(i):start])) == ""}
	}
}

// lineOf is the index of the line holding offset off.
func (d *doc) lineOf(off int) int {
	return sort.SearchInts(d.ends, off)
}

func (d *doc) lineStart(i int) int {
	if i == 0 {
		return 0
	}
	return d.ends[i-1] + 1
}

// line is the whole source line holding offset off.
func (d *doc) line(off int) string {
	i := d.lineOf(off)
	return string(d.src[d.lineStart(i):d.ends[i]])
}

// text is the rest of the line from offset off.
func (d *doc) text(off int) string {
	return string(d.src[off:d.ends[d.lineOf(off)]])
}

// inSpan reports whether off is inside a code span's content.
func (d *doc) inSpan(off int) bool {
	for _, s := range d.spans {
		if off >= s[0] && off < s[1] {
			return true
		}
	}
	return false
}

func quoted(n ast.Node) bool {
	for p := n.Parent(); p != nil; p = p.Parent() {
		if p.Kind() == ast.KindBlockquote {
			return true
		}
	}
	return false
}

// parseCommand interprets the text after the trigger; bare says which
// words are commands alone (see ParseWith).
func parseCommand(rest string, more []string, line int, trigger string, bare func(Name) bool) Result {
	if rest == "" {
		return Result{Kind: Help, Name: HelpCmd}
	}
	word, args := cutWord(rest)
	switch n := Name(strings.ToLower(word)); n {
	case HelpCmd:
		if args == "" {
			return Result{Kind: Help, Name: HelpCmd}
		}
	case Approve:
		return parseApprove(args, line, trigger)
	case Deny:
		return parseDeny(args, line, trigger)
	case Run:
		// "run" is not a command word: `/agent run the tests` is a
		// request, and a bare `/agent run` asks for nothing to run.
	default:
		// Bare, the caller's words are commands; with more words
		// ("review the auth code") they stay a request in free text, as
		// they always were.
		if args == "" && bare(n) {
			return Result{Kind: Command, Command: Cmd{Name: n, Line: line}}
		}
	}
	// Anything else, including "help me with X", is a request in free text.
	prompt := rest
	if len(more) > 0 {
		prompt += "\n" + strings.Join(more, "\n")
	}
	return Result{Kind: Command, Command: Cmd{Name: Run, Prompt: prompt, Line: line}}
}

func parseApprove(args string, line int, trigger string) Result {
	id, extra := cutWord(args)
	if extra != "" {
		return invalid(Approve, trigger, "`approve` takes one approval id or `all`, got "+quoteArg(args))
	}
	if id == "" || strings.EqualFold(id, "all") {
		return Result{Kind: Command, Command: Cmd{Name: Approve, All: true, Line: line}}
	}
	if !validID(id) {
		return invalid(Approve, trigger, "`"+quoteArg(id)+"` is not an approval id (letters, digits, `-`, `_`, `.`; at most 64)")
	}
	return Result{Kind: Command, Command: Cmd{Name: Approve, ApprovalID: id, Line: line}}
}

func parseDeny(args string, line int, trigger string) Result {
	id, reason := cutWord(args)
	if id == "" {
		return invalid(Deny, trigger, "`deny` needs the id of the approval to deny")
	}
	if strings.EqualFold(id, "all") {
		return invalid(Deny, trigger, "`deny` answers one approval at a time: give its id")
	}
	if !validID(id) {
		return invalid(Deny, trigger, "`"+quoteArg(id)+"` is not an approval id (letters, digits, `-`, `_`, `.`; at most 64)")
	}
	return Result{Kind: Command, Command: Cmd{Name: Deny, ApprovalID: id, DenyReason: reason, Line: line}}
}

func invalid(n Name, trigger, reason string) Result {
	return Result{Kind: Invalid, Name: n, Reason: reason, Usage: lookup(n).usage(trigger)}
}

// quoteArg shortens user text echoed back in an error and strips backticks
// so it cannot break out of the code span it is shown in.
func quoteArg(s string) string {
	s = strings.ReplaceAll(s, "`", "'")
	if utf8.RuneCountInString(s) > 40 {
		r := []rune(s)
		s = string(r[:40]) + "…"
	}
	return s
}

// validID accepts the shape of approval ids without knowing their issuer:
// 1–64 of [A-Za-z0-9._-], starting with a letter or digit.
func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '-' || c == '_' || c == '.'))
		if !ok {
			return false
		}
	}
	return true
}

// cutWord splits s at its first run of whitespace.
func cutWord(s string) (word, rest string) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

// startsWithTrigger reports whether line (already left-trimmed) begins with
// the trigger followed by whitespace or its end.
func startsWithTrigger(line, trigger string) bool {
	if len(line) < len(trigger) || !strings.EqualFold(line[:len(trigger)], trigger) {
		return false
	}
	if len(line) == len(trigger) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(line[len(trigger):])
	return unicode.IsSpace(r)
}
