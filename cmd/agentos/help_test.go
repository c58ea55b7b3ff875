package main

import (
	"flag"
	"strings"
	"testing"
)

// helpFlags returns every flag a command's help documents, per flag set
// ("run", "tool call", ...), with the argument list that reaches it.
func helpFlags(name string, h help) map[string][]*flag.Flag {
	sets := map[string][]*flag.Flag{}
	collect := func(key string, register func(*flag.FlagSet)) {
		fs := flag.NewFlagSet(key, flag.ContinueOnError)
		register(fs)
		fs.VisitAll(func(f *flag.Flag) { sets[key] = append(sets[key], f) })
	}
	if h.flags != nil {
		collect(name, h.flags)
	}
	for _, s := range h.subcommands {
		if s.flags != nil {
			collect(name+" "+s.name, s.flags)
		}
	}
	return sets
}

// TestHelpForEveryCommand: `agentos CMD -h` and `--help` (and `agentos
// help CMD`) print, to stdout with exit 0, the usage line, a description,
// every flag with its default and at least one example — for every
// command in the table.
func TestHelpForEveryCommand(t *testing.T) {
	hs := helps()
	for name := range commands() {
		t.Run(name, func(t *testing.T) {
			h, ok := hs[name]
			if !ok {
				t.Fatalf("command %s has no entry in helps()", name)
			}
			if len(h.usage) == 0 || len(h.description) < 40 || len(h.examples) == 0 {
				t.Fatalf("help for %s lacks a usage line, a description or an example: %+v", name, h)
			}
			for _, args := range [][]string{{name, "-h"}, {name, "--help"}, {"help", name}} {
				out, errOut, code := runCLI(t, args...)
				if code != exitOK || errOut != "" {
					t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
				}
				if !strings.HasPrefix(out, "usage: agentos "+name) {
					t.Errorf("%v: does not start with the usage line:\n%s", args, out)
				}
				firstWords := strings.Join(strings.Fields(h.description)[:5], " ")
				if !strings.Contains(strings.Join(strings.Fields(out), " "), firstWords) {
					t.Errorf("%v: no description", args)
				}
				i := strings.Index(out, "\nexamples:\n")
				if i < 0 || !strings.Contains(out[i:], "agentos") {
					t.Errorf("%v: no example:\n%s", args, out)
				}
				for _, fl := range helpFlags(name, h) {
					for _, f := range fl {
						if !strings.Contains(out, "  -"+f.Name+" ") && !strings.Contains(out, "  -"+f.Name+"\n") {
							t.Errorf("%v: flag -%s is not listed:\n%s", args, f.Name, out)
						}
						if f.DefValue != "" && f.DefValue != "false" && !strings.Contains(out, f.DefValue) {
							t.Errorf("%v: the default of -%s (%s) is not shown", args, f.Name, f.DefValue)
						}
					}
				}
			}
		})
	}
	for name := range hs {
		if _, ok := commands()[name]; !ok {
			t.Errorf("helps() documents %s, which is not a command", name)
		}
	}
}

// TestHelpListsTheFlagsTheCommandParses: every flag the help lists is
// accepted by the command itself: giving it (with its default value)
// followed by -h reaches the help instead of a "flag provided but not
// defined" usage error. -h after other arguments works too.
func TestHelpListsTheFlagsTheCommandParses(t *testing.T) {
	for name, h := range helps() {
		for set, flags := range helpFlags(name, h) {
			prefix := strings.Fields(set)
			if len(prefix) == 1 && (name == "hooks" || name == "skills") {
				prefix = append(prefix, map[string]string{"hooks": "test", "skills": "list"}[name])
			}
			for _, f := range flags {
				args := append(append([]string(nil), prefix...), "-"+f.Name+"="+f.DefValue, "-h")
				out, errOut, code := runCLI(t, args...)
				if code != exitOK || !strings.HasPrefix(out, "usage: agentos "+name) {
					t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
				}
			}
		}
	}
}

// TestTopLevelHelp: agentos -h lists every command and the exit codes;
// an unknown flag names the way to the help.
func TestTopLevelHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		out, _, code := runCLI(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d", args, code)
		}
		for name := range commands() {
			if !strings.Contains(out, "\n  "+name+" ") {
				t.Errorf("%v: command %s missing", args, name)
			}
		}
		for _, want := range []string{"exit codes:", "  4  paused", "  5  failed"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: lacks %q", args, want)
			}
		}
	}
	if _, _, code := runCLI(t); code != exitUsage {
		t.Errorf("no arguments: exit %d, want %d", code, exitUsage)
	}
	_, errOut, code := runCLI(t, "run", "--frobnicate")
	if code != exitUsage || !strings.Contains(errOut, "agentos run -h") {
		t.Errorf("unknown flag: exit %d %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, "help", "frobnicate"); code != exitUsage || !strings.Contains(errOut, "unknown command") {
		t.Errorf("help for an unknown command: exit %d %q", code, errOut)
	}
}

// TestHelpExamplesUseListedFlags: every flag an example passes to an
// agentos command is one the command's help lists (and so one it
// parses): an example cannot show a flag that does not exist.
func TestHelpExamplesUseListedFlags(t *testing.T) {
	cmds, hs := commands(), helps()
	known := func(name string) map[string]bool {
		k := map[string]bool{"h": true, "help": true}
		for _, set := range helpFlags(name, hs[name]) {
			for _, f := range set {
				k[f.Name] = true
			}
		}
		return k
	}
	checked := 0
	for name, h := range hs {
		for _, ex := range h.examples {
			// The command the example runs (an example may show a related
			// command, or a workflow step that runs none).
			words := strings.Fields(ex)
			cmd, start := "", -1
			for i := 0; i+1 < len(words); i++ {
				if _, ok := cmds[words[i+1]]; ok && words[i] == "agentos" {
					cmd, start = words[i+1], i+2
					break
				}
			}
			if start < 0 {
				continue
			}
			checked++
			flags := known(cmd)
			for _, w := range words[start:] {
				if w == "--" {
					break
				}
				if !strings.HasPrefix(w, "-") || w == "-" {
					continue
				}
				flagName := strings.TrimLeft(w, "-")
				if i := strings.IndexByte(flagName, '='); i >= 0 {
					flagName = flagName[:i]
				}
				if !flags[flagName] {
					t.Errorf("%s: example %q passes -%s, which agentos %s -h does not list", name, ex, flagName, cmd)
				}
			}
		}
	}
	if checked < len(hs) {
		t.Errorf("only %d examples run agentos, fewer than the %d commands", checked, len(hs))
	}
}

// TestDoctorHelpListsOnlyDoctorFlags: doctor lists and accepts the flags
// it reads, not serve's --addr and --store, which mean nothing to it.
func TestDoctorHelpListsOnlyDoctorFlags(t *testing.T) {
	var names []string
	for _, set := range helpFlags("doctor", helps()["doctor"]) {
		for _, f := range set {
			names = append(names, f.Name)
		}
	}
	if got := strings.Join(names, ","); got != "config,data,json,workspace" {
		t.Errorf("doctor's flags: %s, want config,data,json,workspace", got)
	}
	out, _, code := runCLI(t, "doctor", "-h")
	if code != exitOK || strings.Contains(out, "-addr") || strings.Contains(out, "-store") {
		t.Errorf("doctor -h: exit %d\n%s", code, out)
	}
	if _, errOut, code := runCLI(t, "doctor", "--addr", "127.0.0.1:1"); code != exitUsage || !strings.Contains(errOut, "flag provided but not defined: -addr") {
		t.Errorf("doctor --addr: exit %d %q, want a usage error", code, errOut)
	}
}

// TestHelpExamplesRun runs the examples that need nothing outside this
// machine: agentos version, and agentos bench guard, which runs its
// built-in corpus by default and says how to add the npm ones instead of
// failing when they are not installed.
func TestHelpExamplesRun(t *testing.T) {
	t.Setenv("AGENTOS_NPM_DIR", t.TempDir())
	for _, name := range []string{"version", "bench"} {
		for _, ex := range helps()[name].examples {
			words := strings.Fields(ex)
			if words[0] != "agentos" || strings.Contains(ex, "--corpus github") || strings.Contains(ex, "--corpus mcp") {
				continue
			}
			out, errOut, code := runCLI(t, words[1:]...)
			if code != exitOK || out == "" {
				t.Errorf("%s: exit %d\n%s%s", ex, code, out, errOut)
			}
			if ex == "agentos bench guard" && (!strings.Contains(out, "builtin") || !strings.Contains(errOut, "npm install --prefix")) {
				t.Errorf("%s: want the builtin corpus run and a note on adding the others:\n%s%s", ex, out, errOut)
			}
		}
	}
	// A corpus asked for by name must be there.
	if _, errOut, code := runCLI(t, "bench", "guard", "--corpus", "github"); code == exitOK || !strings.Contains(errOut, "npm install --prefix") {
		t.Errorf("bench guard --corpus github without it installed: exit %d %q", code, errOut)
	}
}
