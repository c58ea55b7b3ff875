package toolrule

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/agentos/agentos/kernel/argv"

	"mvdan.cc/sh/v3/syntax"
)

// simple is one simple command of a command line: its assignments
// (NAME=value, rendered) and its words' literal values.
type simple struct {
	assigns []string
	args    []string
}

// redir is a redirection's target.
type redir struct {
	target string
	write  bool
	read   bool
}

// maxCommand bounds the command line parsed: a model's command is short,
// and the parser should not spend long on a hostile one.
const maxCommand = 64 << 10

// evalLike are programs that run another command line or program given as
// their arguments: a rule about the outer command says nothing of the
// inner one, so they are refused while Bash rules are in force.
var evalLike = map[string]bool{
	"eval": true, "exec": true, "source": true, ".": true, "command": true, "builtin": true,
	"sh": true, "bash": true, "zsh": true, "dash": true, "ksh": true, "mksh": true, "fish": true, "csh": true, "tcsh": true, "busybox": true,
	"env": true, "xargs": true, "sudo": true, "su": true, "doas": true, "nsenter": true, "chroot": true, "setsid": true, "stdbuf": true, "unbuffer": true, "watch": true, "parallel": true,
}

// findExec are find's actions that run a command.
var findExec = map[string]bool{"-exec": true, "-execdir": true, "-ok": true, "-okdir": true}

// split parses a command line and returns its simple commands and
// redirections, or an error saying what could not be proved harmless.
func split(command string) ([]simple, []redir, error) {
	switch {
	case strings.TrimSpace(command) == "":
		return nil, nil, errors.New("an empty command")
	case len(command) > maxCommand:
		return nil, nil, fmt.Errorf("the command is longer than %d bytes", maxCommand)
	case strings.ContainsRune(command, 0):
		return nil, nil, errors.New("the command contains a NUL byte")
	case strings.Contains(command, "\\\n") || strings.Contains(command, "\\\r\n"):
		// The shell joins the lines, process.run's argv splitting does
		// not: the two readings would differ.
		return nil, nil, errors.New("a line continuation (backslash-newline) is not checked; write the command on one line")
	}
	f, err := syntax.NewParser(syntax.KeepComments(true), syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(command), "")
	if err != nil {
		return nil, nil, fmt.Errorf("the command does not parse as a shell command line: %v", err)
	}
	var why error
	syntax.Walk(f, func(n syntax.Node) bool {
		if why != nil {
			return false
		}
		if _, ok := n.(*syntax.Comment); ok {
			// A shell drops a comment, process.run passes it on as
			// arguments: the two readings would differ.
			why = errors.New("a comment (#) is not checked; leave it out")
		}
		return why == nil
	})
	if why != nil {
		return nil, nil, why
	}
	w := &walker{}
	if err := w.stmts(f.Stmts); err != nil {
		return nil, nil, err
	}
	if len(w.cmds) == 0 {
		return nil, nil, errors.New("the command line runs no command")
	}
	return w.cmds, w.reds, nil
}

type walker struct {
	cmds  []simple
	reds  []redir
	depth int
}

func (w *walker) stmts(ss []*syntax.Stmt) error {
	for _, s := range ss {
		if err := w.stmt(s); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) stmt(s *syntax.Stmt) error {
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > 64 {
		return errors.New("the command line nests too deeply")
	}
	if s.Background || s.Coprocess || s.Disown {
		return errors.New("a command run in the background (&) is not checked")
	}
	for _, r := range s.Redirs {
		if err := w.redirect(r); err != nil {
			return err
		}
	}
	switch c := s.Cmd.(type) {
	case nil:
		return nil // redirections only, checked above
	case *syntax.CallExpr:
		return w.call(c)
	case *syntax.BinaryCmd:
		if err := w.stmt(c.X); err != nil {
			return err
		}
		return w.stmt(c.Y)
	case *syntax.Subshell:
		return w.stmts(c.Stmts)
	case *syntax.Block:
		return w.stmts(c.Stmts)
	default:
		return fmt.Errorf("a %s is not a construct the rules can check; run simple commands", construct(c))
	}
}

// construct names a shell construct for messages.
func construct(c syntax.Command) string {
	switch c.(type) {
	case *syntax.IfClause:
		return "if clause"
	case *syntax.WhileClause:
		return "while/until loop"
	case *syntax.ForClause:
		return "for loop"
	case *syntax.CaseClause:
		return "case clause"
	case *syntax.FuncDecl:
		return "function declaration"
	case *syntax.DeclClause:
		return "declaration (export, local, declare, readonly)"
	case *syntax.ArithmCmd:
		return "arithmetic command"
	case *syntax.TestClause:
		return "[[ test ]]"
	case *syntax.TimeClause:
		return "time clause"
	case *syntax.CoprocClause:
		return "coprocess"
	case *syntax.LetClause:
		return "let clause"
	}
	return fmt.Sprintf("%T", c)
}

func (w *walker) redirect(r *syntax.Redirect) error {
	if r.N != nil && !digits(r.N.Value) {
		return fmt.Errorf("a redirection to a named file descriptor {%s} is not checked", r.N.Value)
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return errors.New("a here-document or here-string is not checked")
	case syntax.DplIn, syntax.DplOut:
		v, err := wordValue(r.Word)
		if err != nil {
			return err
		}
		if v == "-" || digits(v) {
			return nil // 2>&1, >&-: descriptors, no file
		}
		return fmt.Errorf("a redirection %s%s is not checked", r.Op, v)
	}
	v, err := wordValue(r.Word)
	if err != nil {
		return err
	}
	switch r.Op {
	case syntax.RdrIn:
		w.reds = append(w.reds, redir{target: v, read: true})
	case syntax.RdrInOut:
		w.reds = append(w.reds, redir{target: v, read: true, write: true})
	case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.RdrAll, syntax.AppAll:
		w.reds = append(w.reds, redir{target: v, write: true})
	default:
		return fmt.Errorf("a redirection %s is not checked", r.Op)
	}
	return nil
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (w *walker) call(c *syntax.CallExpr) error {
	var sc simple
	for _, a := range c.Assigns {
		if a.Append || a.Naked || a.Index != nil || a.Array != nil || a.Name == nil {
			return errors.New("an assignment other than NAME=value is not checked")
		}
		v := ""
		if a.Value != nil {
			var err error
			if v, err = wordValue(a.Value); err != nil {
				return err
			}
		}
		sc.assigns = append(sc.assigns, a.Name.Value+"="+quote(v))
	}
	for _, word := range c.Args {
		v, err := wordValue(word)
		if err != nil {
			return err
		}
		sc.args = append(sc.args, v)
	}
	w.cmds = append(w.cmds, sc)
	return nil
}

// wordValue is a word's literal value: quotes removed, escapes applied.
// A part whose value is not in the text (an expansion or substitution)
// is an error naming it.
func wordValue(w *syntax.Word) (string, error) {
	if w == nil {
		return "", errors.New("a missing word")
	}
	var b strings.Builder
	for _, part := range w.Parts {
		if err := partValue(&b, part, false); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

func partValue(b *strings.Builder, part syntax.WordPart, quoted bool) error {
	switch p := part.(type) {
	case *syntax.Lit:
		unescape(b, p.Value, quoted)
	case *syntax.SglQuoted:
		if p.Dollar {
			return errors.New("$'…' quoting is not checked")
		}
		b.WriteString(p.Value)
	case *syntax.DblQuoted:
		if p.Dollar {
			return errors.New(`$"…" quoting is not checked`)
		}
		for _, q := range p.Parts {
			if err := partValue(b, q, true); err != nil {
				return err
			}
		}
	case *syntax.ParamExp:
		return errors.New("a parameter expansion ($NAME) is not checked; write the value")
	case *syntax.CmdSubst:
		if p.Backquotes {
			return errors.New("a command substitution (`…`) runs a command the rules do not see")
		}
		return errors.New("a command substitution ($(…)) runs a command the rules do not see")
	case *syntax.ArithmExp:
		return errors.New("an arithmetic expansion ($((…))) is not checked")
	case *syntax.ProcSubst:
		return errors.New("a process substitution (<(…) or >(…)) runs a command the rules do not see")
	case *syntax.ExtGlob:
		return errors.New("an extended glob is not checked")
	default:
		return fmt.Errorf("%T is not checked", part)
	}
	return nil
}

// unescape applies the shell's backslash escapes to literal text: outside
// quotes a backslash takes the next character as it is; inside double
// quotes only before $ ` " \.
func unescape(b *strings.Builder, s string, quoted bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		next := s[i+1]
		if quoted && !strings.ContainsRune("$`\"\\", rune(next)) {
			b.WriteByte(c)
			continue
		}
		i++
		b.WriteByte(next)
	}
}

// quote renders a word for the canonical command line: as it is when it
// has no character a shell treats specially, else single-quoted. Words
// joined by spaces then read back unambiguously, so a rule's literal
// "npm test" can only match the two words npm and test.
func quote(s string) string {
	if s == "" {
		return "''"
	}
	if !strings.ContainsAny(s, " \t\n\r\v\f'\"\\;&|<>()$`") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func canonical(assigns, args []string) string {
	parts := append([]string(nil), assigns...)
	for _, a := range args {
		parts = append(parts, quote(a))
	}
	return strings.Join(parts, " ")
}

// unwrap drops the wrappers Claude Code strips before matching (nohup,
// nice, timeout with their options): they run the rest as it is.
func unwrap(args []string) []string {
	for len(args) > 1 {
		switch path.Base(args[0]) {
		case "nohup":
			args = args[1:]
		case "nice":
			rest := args[1:]
			switch {
			case len(rest) > 1 && rest[0] == "-n":
				rest = rest[2:]
			case len(rest) > 0 && strings.HasPrefix(rest[0], "-"):
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return args
			}
			args = rest
		case "timeout":
			rest := args[1:]
			for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
				if (rest[0] == "-s" || rest[0] == "-k" || rest[0] == "--signal" || rest[0] == "--kill-after") && len(rest) > 1 {
					rest = rest[2:]
					continue
				}
				rest = rest[1:]
			}
			if len(rest) < 2 {
				return args
			}
			args = rest[1:] // the duration
		default:
			return args
		}
	}
	return args
}

// CheckCommand checks a command line against the Bash rules, and its
// redirections against the Read and Edit rules. cwd is the
// repository-relative directory the command runs in ("" for the root).
func (s *Set) CheckCommand(tool, command, cwd string) *Refusal {
	if !s.inForce(famBash) {
		return nil
	}
	cmds, reds, err := split(command)
	if err != nil {
		return &Refusal{Tool: tool, Subject: command, Reason: err.Error()}
	}
	for _, r := range reds {
		if ref := s.redirect(tool, cwd, r.target, r.write); ref != nil {
			return ref
		}
		if r.read && r.write {
			if ref := s.redirect(tool, cwd, r.target, false); ref != nil {
				return ref
			}
		}
	}
	allow, all := s.allowRules(famBash)
	deny := s.denyRules(famBash)
	for _, c := range cmds {
		if ref := s.checkSimple(tool, c, allow, all, deny); ref != nil {
			return ref
		}
	}
	// process.run starts no shell: it splits the line into argv
	// (kernel/argv) and runs that. Where the two readings part — an
	// operator glued to a word ("go test>&0" is the program go with the
	// argument "test>&0"; "(go" is a program name) — the argv is what
	// runs, so it must be allowed too.
	run, err := argv.Split(command)
	if err != nil {
		return &Refusal{Tool: tool, Subject: command, Reason: "process.run cannot split the command into arguments: " + err.Error()}
	}
	if ref := s.checkSimple(tool, simple{args: run}, allow, all, deny); ref != nil {
		ref.Reason += fmt.Sprintf(" (as process.run runs it, without a shell: %q)", run)
		return ref
	}
	return nil
}

func (s *Set) checkSimple(tool string, c simple, allow []Rule, all bool, deny []Rule) *Refusal {
	text := canonical(c.assigns, c.args)
	inner := unwrap(c.args)
	for _, argv := range [][]string{c.args, inner} {
		if len(argv) == 0 {
			continue
		}
		name := path.Base(argv[0])
		if strings.ContainsAny(argv[0], "*?[") {
			return &Refusal{Tool: tool, Subject: text, Reason: "a glob in a command's name is not checked"}
		}
		if evalLike[name] {
			return &Refusal{Tool: tool, Subject: text, Reason: fmt.Sprintf("%s runs another command the rules do not see; run that command directly", name)}
		}
		if name == "find" {
			for _, a := range argv[1:] {
				if findExec[a] {
					return &Refusal{Tool: tool, Subject: text, Reason: fmt.Sprintf("find %s runs another command the rules do not see", a)}
				}
			}
		}
	}
	// A deny rule matches the command however it is dressed: with or
	// without its assignments and wrappers, by path or by name.
	var denyForms []string
	for _, argv := range [][]string{c.args, inner} {
		for _, as := range [][]string{c.assigns, nil} {
			denyForms = append(denyForms, canonical(as, argv))
			if len(argv) > 0 && path.Base(argv[0]) != argv[0] {
				named := append([]string{path.Base(argv[0])}, argv[1:]...)
				denyForms = append(denyForms, canonical(as, named))
			}
		}
	}
	for _, r := range deny {
		for _, re := range r.cmds {
			for _, form := range denyForms {
				if re.MatchString(form) {
					return &Refusal{Tool: tool, Subject: text, Rule: r.Raw, Reason: "a disallowed rule matches the command"}
				}
			}
		}
	}
	if all || len(allow) == 0 {
		return nil
	}
	// An allow rule must match the command as written (assignments
	// included: they change what a program does) or without the
	// wrappers Claude Code strips.
	allowForms := []string{text}
	if len(inner) != len(c.args) {
		allowForms = append(allowForms, canonical(c.assigns, inner))
	}
	for _, r := range allow {
		for _, re := range r.cmds {
			for _, form := range allowForms {
				if re.MatchString(form) {
					return nil
				}
			}
		}
	}
	return &Refusal{Tool: tool, Subject: text, Allowed: raws(allow), Reason: "no allowed Bash rule matches the command"}
}
