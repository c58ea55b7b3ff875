package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel"
	"github.com/agentos/agentos/kernel/tools"
	"github.com/agentos/agentos/runtime/mcp"
)

type nopRecorder struct{}

func (nopRecorder) Record(context.Context, string, string, any, string) (string, error) {
	return "", nil
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

// benchServers mounts the Go SDK fault server and server-everything
// (when installed) next to the built-in tools, every tool allowed.
func benchServers(b *testing.B) (*env, bool) {
	dir := b.TempDir()
	bin := faultServer(b, dir)
	cfg := `{"mcpServers":{"go":{"command":"` + bin + `"}`
	everything := false
	if entry := filepath.Join(npmDir(), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"); fileExists(entry) {
		cfg += `,"node":{"command":"node","args":["` + entry + `","stdio"]}`
		everything = true
	}
	cfg += `}}`
	pol := policyWith(b, "")
	allow(pol, "mcp.go.echo", "mcp.node.echo")
	e := newEnv(b, dir, cfg, pol, mcp.Options{})
	for _, d := range tools.Defs(e.ws, tools.Options{}) {
		if err := e.k.Register(d); err != nil {
			b.Fatal(err)
		}
	}
	return e, everything
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// BenchmarkToolCallOverhead compares, in one run, the median time of one
// call through the full kernel of the built-in echo tool and of the echo
// tool of an MCP server over stdio (the Go SDK server, and Node's
// server-everything), interleaved so that both see the same machine load.
// Metrics: builtin-µs, mcp-go-µs, mcp-node-µs (medians per call) and the
// ratios to the built-in tool.
func BenchmarkToolCallOverhead(b *testing.B) {
	e, everything := benchServers(b)
	ctx := context.Background()
	if notes := e.m.Register(ctx, e.k, nil); len(notes) > 0 {
		b.Fatal(notes)
	}
	call := func(name, args string) time.Duration {
		start := time.Now()
		if _, err := e.k.Dispatch(ctx, nopRecorder{}, kernel.Call{ID: "c", Name: name, Args: json.RawMessage(args)}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var builtin, goMCP, nodeMCP []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		builtin = append(builtin, call("echo", `{"text":"hello"}`))
		goMCP = append(goMCP, call("mcp.go.echo", `{"text":"hello"}`))
		if everything {
			nodeMCP = append(nodeMCP, call("mcp.node.echo", `{"message":"hello"}`))
		}
	}
	b.StopTimer()
	mb := median(builtin)
	b.ReportMetric(float64(mb.Nanoseconds())/1e3, "builtin-µs")
	mg := median(goMCP)
	b.ReportMetric(float64(mg.Nanoseconds())/1e3, "mcp-go-µs")
	b.ReportMetric(float64(mg)/float64(mb), "mcp-go/builtin")
	if everything {
		mn := median(nodeMCP)
		b.ReportMetric(float64(mn.Nanoseconds())/1e3, "mcp-node-µs")
		b.ReportMetric(float64(mn)/float64(mb), "mcp-node/builtin")
	}
}

// BenchmarkServerStart measures starting an MCP server in the sandbox
// through its handshake and tool listing (what the first use of a
// server's tools costs), for the Go SDK server and server-everything.
// Metrics: medians in ms.
func BenchmarkServerStart(b *testing.B) {
	dir := b.TempDir()
	bin := faultServer(b, dir)
	entry := filepath.Join(npmDir(), "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	servers := map[string]string{"go": `{"mcpServers":{"s":{"command":"` + bin + `"}}}`}
	if fileExists(entry) {
		servers["node"] = `{"mcpServers":{"s":{"command":"node","args":["` + entry + `","stdio"]}}}`
	}
	pol := policyWith(b, "")
	for name, cfg := range servers {
		b.Run(name, func(b *testing.B) {
			var starts []time.Duration
			for i := 0; i < b.N; i++ {
				e := newEnv(b, dir, cfg, pol, mcp.Options{})
				start := time.Now()
				if _, err := e.m.ListTools(context.Background(), "s"); err != nil {
					b.Fatal(err)
				}
				starts = append(starts, time.Since(start))
				e.m.Close()
			}
			b.ReportMetric(float64(median(starts).Microseconds())/1e3, "start-ms")
		})
	}
}
