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
	corpora = fs.String("corpus", "builtin,github,mcp", "corpora to run, comma-separated: builtin, github (GitHub's REST description, @octokit/openapi), mcp (the MCP reference servers filesystem, memory, everything)")
	npmDir = fs.String("npm-dir", "", "where the npm corpora are installed (default $AGENTOS_NPM_DIR, else ~/.cache/agentos-npm; bash .ci/npm-deps.sh installs them)")
	asJSON = fs.Bool("json", false, "print the results as JSON")
	return
}

// cmdBench runs a benchmark; today the tool-guard benchmark (docs/reliability.md).
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
	tmp, err := os.MkdirTemp("", "agentos-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var results []bench.Result
	for _, name := range strings.Split(*corpora, ",") {
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
			return fmt.Errorf("bench guard: corpus %s: %w (the npm corpora install with `bash .ci/npm-deps.sh`)", name, err)
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
