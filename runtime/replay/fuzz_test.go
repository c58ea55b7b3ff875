package replay

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentos/agentos/schemas"
)

// FuzzVerify feeds VerifyReader any bytes, seeded with the beginnings of
// the sessions the suite keeps (real runs of the demo, an approval, a
// rework) and a line cut in the middle. It never panics or fails on its own reading; a log it calls
// valid is one event per line, seq 1..n of one session, that replays; a
// log it rejects names the problem.
func FuzzVerify(f *testing.F) {
	paths, _ := filepath.Glob("../../testdata/sessions/*.jsonl")
	paths = append(paths, "../../testdata/example-session/events.jsonl")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		// The first lines of each (small inputs keep the fuzzer fast: it
		// minimizes every new input), one cut mid-line.
		lines := bytes.SplitAfter(b, []byte("\n"))
		for _, n := range []int{1, 3, 6} {
			if n <= len(lines) {
				f.Add(bytes.Join(lines[:n], nil))
			}
		}
		if len(lines) > 2 {
			f.Add(append(bytes.Join(lines[:2], nil), lines[2][:len(lines[2])/2]...))
		}
	}
	reg := schemas.MustDefault()
	f.Fuzz(func(t *testing.T, log []byte) {
		rep, err := VerifyReader(reg, bytes.NewReader(log))
		if err != nil {
			t.Fatalf("VerifyReader on memory: %v", err)
		}
		if !rep.Valid {
			if rep.Problem == nil || rep.Problem.Code == "" || rep.Problem.Message == "" {
				t.Fatalf("invalid without a named problem: %+v", rep)
			}
			return
		}
		if rep.Problem != nil {
			t.Fatalf("valid with a problem: %+v", rep.Problem)
		}
		lines := bytes.Split(bytes.TrimSuffix(log, []byte("\n")), []byte("\n"))
		if len(log) == 0 {
			lines = nil
		}
		if rep.Events != len(lines) {
			t.Fatalf("valid log of %d lines reports %d events", len(lines), rep.Events)
		}
		for i, l := range lines {
			var head struct {
				Seq       int64  `json:"seq"`
				SessionID string `json:"session_id"`
			}
			if err := json.Unmarshal(l, &head); err != nil {
				t.Fatalf("valid log, line %d is not JSON: %v", i+1, err)
			}
			if head.Seq != int64(i+1) || head.SessionID != rep.SessionID {
				t.Fatalf("valid log, line %d has seq %d session %q (report: session %q)", i+1, head.Seq, head.SessionID, rep.SessionID)
			}
		}
		if _, err := ReplayReader(bytes.NewReader(log)); err != nil {
			t.Fatalf("a log verify accepts does not replay: %v", err)
		}
	})
}
