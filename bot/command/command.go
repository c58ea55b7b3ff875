// Package command owns the comment-command language of the bot: it turns
// the body of a GitHub comment into at most one command (`/agent <prompt>`,
// `/agent approve`, `/agent deny`, `/agent status`, `/agent cancel`,
// `/agent help`, `/agent review`, `/agent triage`), and renders the help text from the commands' own
// descriptions. It is pure: no I/O, no GitHub types, no authorization —
// who may run a command is described here and enforced by the caller.
package command

import (
	"strings"
	"unicode"
	"unicode/utf8"
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

// Parse finds the first command in a comment body. trigger is the command
// word ("" means DefaultTrigger); it is matched case-insensitively and must
// start a line (after optional whitespace) and be followed by whitespace or
// the end of the line. Lines inside fenced code blocks (``` or ~~~), lines
// that start inside a code span, and quoted lines (">") never hold a
// command. Only the first command of a comment counts.
func Parse(body, trigger string) Result {
	if trigger == "" {
		trigger = DefaultTrigger
	}
	if strings.TrimSpace(body) == "" {
		return Result{Kind: Ignore, Reason: string(EmptyInput)}
	}
	lines := splitLines(body)
	class := classify(lines)
	ignored := NoTrigger
	for i, raw := range lines {
		line := strings.TrimLeftFunc(raw, unicode.IsSpace)
		switch class[i] {
		case inFence, inSpan:
			if startsWithTrigger(strings.TrimLeft(line, "`"), trigger) {
				ignored = InCode
			}
			continue
		case fenceLine, blank:
			continue
		}
		if strings.HasPrefix(line, ">") {
			if startsWithTrigger(strings.TrimLeft(line, "> \t"), trigger) {
				ignored = InQuote
			}
			continue
		}
		if strings.HasPrefix(line, "`") {
			if startsWithTrigger(strings.TrimLeft(line, "`"), trigger) {
				ignored = InCode
			}
			continue
		}
		if !startsWithTrigger(line, trigger) {
			continue
		}
		rest := strings.TrimSpace(line[len(trigger):])
		// A free-text prompt continues over the rest of its paragraph.
		var more []string
		for j := i + 1; j < len(lines) && (class[j] == text || class[j] == inSpan); j++ {
			next := strings.TrimSpace(lines[j])
			if class[j] == text && (strings.HasPrefix(next, ">") || startsWithTrigger(next, trigger)) {
				break
			}
			more = append(more, next)
		}
		return parseCommand(rest, more, i+1, trigger)
	}
	return Result{Kind: Ignore, Reason: string(ignored)}
}

// lineClass is what a line is, as far as finding commands goes.
type lineClass uint8

const (
	text      lineClass = iota
	blank               // empty or only whitespace: ends a paragraph
	fenceLine           // opens or closes a fenced code block
	inFence             // inside a fenced code block
	inSpan              // starts inside a code span that began on an earlier line
)

// classify marks fenced blocks, then finds code spans that cross lines:
// CommonMark lets a span run over the lines of one paragraph, and an
// opening backtick run with no closing run of the same length is literal.
func classify(lines []string) []lineClass {
	class := make([]lineClass, len(lines))
	var fence string
	for i, raw := range lines {
		line := strings.TrimLeftFunc(raw, unicode.IsSpace)
		switch {
		case fence != "":
			if closesFence(line, fence) {
				fence = ""
				class[i] = fenceLine
			} else {
				class[i] = inFence
			}
		case openingFence(line) != "":
			fence = openingFence(line)
			class[i] = fenceLine
		case line == "":
			class[i] = blank
		}
	}
	for i := 0; i < len(lines); {
		if class[i] != text {
			i++
			continue
		}
		j := i
		for j < len(lines) && class[j] == text {
			j++
		}
		markSpans(lines[i:j], class[i:j])
		i = j
	}
	return class
}

// markSpans marks the lines of one paragraph that start inside a code span.
func markSpans(lines []string, class []lineClass) {
	if len(lines) < 2 {
		return
	}
	para := strings.Join(lines, "\n")
	starts := make([]int, len(lines)) // offset of each line in para
	off := 0
	for k, l := range lines {
		starts[k] = off
		off += len(l) + 1
	}
	for pos := 0; pos < len(para); {
		open := strings.IndexByte(para[pos:], '`')
		if open < 0 {
			return
		}
		open += pos
		n := runLen(para, open)
		closeAt := -1
		for p := open + n; p < len(para); {
			q := strings.IndexByte(para[p:], '`')
			if q < 0 {
				break
			}
			q += p
			m := runLen(para, q)
			if m == n {
				closeAt = q
				break
			}
			p = q + m
		}
		if closeAt < 0 {
			pos = open + n // unmatched: literal backticks
			continue
		}
		for k := range lines {
			if starts[k] > open && starts[k] <= closeAt {
				class[k] = inSpan
			}
		}
		pos = closeAt + n
	}
}

func runLen(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '`' {
		n++
	}
	return n
}

// parseCommand interprets the text after the trigger.
func parseCommand(rest string, more []string, line int, trigger string) Result {
	if rest == "" {
		return Result{Kind: Help, Name: HelpCmd}
	}
	word, args := cutWord(rest)
	switch Name(strings.ToLower(word)) {
	case HelpCmd:
		if args == "" {
			return Result{Kind: Help, Name: HelpCmd}
		}
	case Status, Cancel, Review, Triage:
		// Bare, these are commands; with more words ("review the auth
		// code") they stay a request in free text, as they always were.
		if args == "" {
			return Result{Kind: Command, Command: Cmd{Name: Name(strings.ToLower(word)), Line: line}}
		}
	case Approve:
		return parseApprove(args, line, trigger)
	case Deny:
		return parseDeny(args, line, trigger)
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

// openingFence returns the fence (``` or ~~~ run, at least three) that
// line opens, or "".
func openingFence(line string) string {
	if len(line) < 3 || (line[0] != '`' && line[0] != '~') {
		return ""
	}
	c := line[0]
	n := 0
	for n < len(line) && line[n] == c {
		n++
	}
	if n < 3 {
		return ""
	}
	// A backtick fence's info string may not contain a backtick (CommonMark).
	if c == '`' && strings.Contains(line[n:], "`") {
		return ""
	}
	return line[:n]
}

// closesFence reports whether line closes a block opened by fence: the same
// character, at least as many, and nothing but whitespace after.
func closesFence(line, fence string) bool {
	c := fence[0]
	n := 0
	for n < len(line) && line[n] == c {
		n++
	}
	return n >= len(fence) && strings.TrimSpace(line[n:]) == ""
}

// splitLines splits on \n, \r\n and lone \r.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}
