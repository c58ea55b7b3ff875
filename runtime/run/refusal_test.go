package run

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// A model that refuses (finish reason safety, as the adapters map
// OpenAI's refusal, Anthropic's refusal stop and Gemini's SAFETY) ends
// the run failed with MODEL_REFUSED quoting the refusal, at once: the
// report no longer says only that the reply "contains no JSON object",
// and no repair turn asks the same model again.
func TestRefusalEndsWithAClearReport(t *testing.T) {
	const refusal = `{text: "I'm sorry, but I can't help with that.", finish_reason: safety}`
	cases := []struct {
		name, script, role string
		calls              int32
	}{
		{"lead", "roles:\n  lead: [" + refusal + ", {text: '" + leadOK + "'}]\n", "lead", 1},
		{"worker", script("    - "+refusal, finalReport), "worker", 3},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.script, nil)
			sid := fmt.Sprintf("refusal-%d", i)
			out, err := f.mgr.Start(context.Background(), f.eng, StartRequest{SessionID: sid, Prompt: "greet"})
			if err != nil {
				t.Fatal(err)
			}
			want := "MODEL_REFUSED: the " + c.role + " model refused the request"
			if out.Status != "failed" || string(out.Terminal.ErrorClass) != "provider_error" || !strings.HasPrefix(out.Terminal.Reason, want) || !strings.Contains(out.Terminal.Reason, "can't help with that") {
				t.Fatalf("got %s/%s %q, want failed/provider_error %q…", out.Status, out.Terminal.ErrorClass, out.Terminal.Reason, want)
			}
			if got := f.calls.calls.Load(); got != c.calls {
				t.Errorf("%d model calls, want %d (no repair turn after a refusal)", got, c.calls)
			}
			verify(t, f.events(t, sid))
		})
	}
}
