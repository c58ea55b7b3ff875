package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentos/agentos/kernel/guard/bench"
)

func benchFlags(fs *flag.FlagSet) (corpora, npmDir *string, asJSON *bool) {
	corpora = fs.String("corpus", "", "corpora to run, comma-separated: builtin (agentos's own tools, always available), github (GitHub's REST description, @octokit/openapi), mcp (the MCP reference servers filesystem, memory, everything); default: builtin, and the npm corpora that are installed")
	npmDir = fs.String("npm-dir", "", "where the npm corpora are installed (default $AGENTOS_NPM_DIR, else ~/.cache/agentos-npm)")
	asJSON = fs.Bool("json", false, "print the results as JSON")
	return
}

// npmCorpora are the packages the optional corpora read, pinned to the
// versions the results in docs/reliability.md were measured with.
const npmCorpora = "@octokit/openapi@23.0.2 @modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/server-memory@2026.8.31"

// npmInstalled reports whether an npm corpus is installed under dir.
func npmInstalled(dir, corpus string) bool {
	var probe string
	switch corpus {
	case "github":
		probe = filepath.Join(dir, "node_modules", "@octokit", "openapi", "generated", "api.github.com.json")
	case "mcp":
		probe = filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-memory")
	default:
		return true
	}
	_, err := os.Stat(probe)
	return err == nil
}

// cmdBench runs a benchmark; today the tool-guard benchmark (docs/reliability.md).
// By default it runs the built-in corpus, and the npm corpora when they
// are installed; a missing one is a note on how to add it, not a failure.
// A corpus named with --corpus must be there.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	corpora, npmDir, asJSON := benchFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "guard" {
		return usageErrorf("usage: agentos bench guard [--corpus builtin,github,mcp] [--npm-dir DIR] [--json]")
	}
	dir := *npmDir
	if dir == "" {
		dir = os.Getenv("AGENTOS_NPM_DIR")
	}
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "agentos-npm")
	}
	names := strings.Split(*corpora, ",")
	if *corpora == "" {
		names = []string{"builtin"}
		var missing []string
		for _, n := range []string{"github", "mcp"} {
			if npmInstalled(dir, n) {
				names = append(names, n)
			} else {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			fmt.Fprintf(stderr, "agentos: bench guard: running builtin; the %s corpus(es) are not installed in %s — to add them: npm install --prefix %s %s (or set --npm-dir / AGENTOS_NPM_DIR to where they are)\n", strings.Join(missing, " and "), dir, dir, npmCorpora)
		}
	}
	tmp, err := os.MkdirTemp("", "agentos-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var results []bench.Result
	for _, name := range names {
		var c *bench.Corpus
		switch strings.TrimSpace(name) {
		case "builtin":
			c, err = bench.Builtin(tmp)
		case "github":
			c, err = bench.OpenAPI(filepath.Join(dir, "node_modules", "@octokit", "openapi", "generated", "api.github.com.json"))
		case "mcp":
			if err := os.Setenv("MEMORY_FILE_PATH", filepath.Join(tmp, "memory.jsonl")); err != nil {
				return err
			}
			c, err = bench.MCP(ctx, "mcp-reference-servers", bench.NPMServers(dir, tmp))
		default:
			return usageErrorf("bench guard: unknown corpus %q (builtin, github, mcp)", name)
		}
		if err != nil {
			return fmt.Errorf("bench guard: corpus %s: %w (to install the npm corpora: npm install --prefix %s %s)", name, err, dir, npmCorpora)
		}
		r, err := bench.Run(ctx, c)
		if err != nil {
			return fmt.Errorf("bench guard: %s: %w", name, err)
		}
		results = append(results, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	fmt.Fprintln(stdout, "# Tool guard benchmark: injected errors over every tool of each corpus")
	fmt.Fprintln(stdout)
	for _, r := range results {
		bench.WriteTable(stdout, r)
	}
	return nil
}
