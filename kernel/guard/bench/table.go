package bench

import (
	"fmt"
	"io"
	"strings"
)

// WriteTable prints a result as docs/reliability.md shows it: per injected error,
// injected / blocked / repaired, then the false-reject rate.
func WriteTable(w io.Writer, r Result) {
	fmt.Fprintf(w, "## %s: %d tools, %d ground-truth calls\n\n", r.Corpus, r.Tools, r.Calls)
	fmt.Fprintln(w, "| injected error | expected class | injected | blocked | right class | repaired | executed | n/a |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	var inj, blk, rep int
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %d | %d |\n", row.Injection, row.Class, row.Injected,
			pct(row.Blocked, row.Injected), pct(row.RightCode, row.Injected), pct(row.Repaired, row.Injected), row.Executed, row.NotApplicable)
		inj, blk, rep = inj+row.Injected, blk+row.Blocked, rep+row.Repaired
	}
	fmt.Fprintf(w, "| **all** | | %d | %s | | %s | | |\n\n", inj, pct(blk, inj), pct(rep, inj))
	fmt.Fprintf(w, "False-reject rate: %s (%d of %d ground-truth calls)\n", pct(r.FalseRejects, r.Calls), r.FalseRejects, r.Calls)
	for i, s := range r.Rejected {
		if i == 10 {
			fmt.Fprintf(w, "  … and %d more\n", len(r.Rejected)-10)
			break
		}
		fmt.Fprintln(w, "  rejected: "+strings.ReplaceAll(s, "\n", " "))
	}
	if len(r.Defects) > 0 {
		fmt.Fprintf(w, "Corpus defects (calls the corpus's own schema refuses; left out): %d\n", len(r.Defects))
		for _, s := range r.Defects {
			fmt.Fprintln(w, "  "+s)
		}
	}
	fmt.Fprintln(w)
}

func pct(n, of int) string {
	if of == 0 {
		return "–"
	}
	return fmt.Sprintf("%d (%.1f%%)", n, 100*float64(n)/float64(of))
}
