package setup

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentos/agentos/runtime/claudecode"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// BenchmarkQueueWarnings: the scan of the session's log queueWarnings
// does, for 4 warnings, over sessions of 0, 1,000 and 10,000 events (the
// 4 warnings among them), in the in-memory store.
func BenchmarkQueueWarnings(b *testing.B) {
	ctx := context.Background()
	sealer, err := event.NewSealer(schemas.MustDefault(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	st := store.NewMemory(sealer)
	var warnings []claudecode.Warning
	for i := 0; i < 4; i++ {
		warnings = append(warnings, claudecode.Warning{Source: ".claude/settings.json", Setting: "permissions.allow", Rule: fmt.Sprint("Rule", i), Message: "m", Effect: claudecode.EffectIgnored})
	}
	for _, n := range []int{1000, 10000} {
		var drafts []event.Draft
		for _, w := range warnings {
			drafts = append(drafts, event.Draft{Type: event.ConfigWarning, Actor: "runtime", Payload: w})
		}
		for i := 0; len(drafts) < n; i++ {
			drafts = append(drafts, event.Draft{Type: event.ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": fmt.Sprintf("c%d", i), "tool": "repo.read", "args": map[string]any{"path": "calc.py"}}})
		}
		var seq int64
		for len(drafts) > 0 {
			k := min(len(drafts), 500)
			evs, err := st.Append(ctx, fmt.Sprint("s", n), seq, drafts[:k]...)
			if err != nil {
				b.Fatal(err)
			}
			seq = evs[len(evs)-1].Seq
			drafts = drafts[k:]
		}
	}
	for _, n := range []int{0, 1000, 10000} {
		session := fmt.Sprint("s", n)
		b.Run(fmt.Sprint(n, "-events"), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				queueWarnings(ctx, st, session, &run.Notices{}, warnings)
			}
		})
	}
}
