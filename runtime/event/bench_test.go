package event

import (
	"testing"
)

// BenchmarkPrepare measures the part of an append that runs in the
// caller's goroutine: redaction, canonical encoding and schema validation
// of a typical tool.invoke payload, as a Go value and as JSON bytes.
func BenchmarkPrepare(b *testing.B) {
	s := newSealer(b)
	value := map[string]any{"call_id": "c1", "tool": "repo.read", "args": map[string]any{"path": "internal/auth/token.go", "range": []int{1, 80}}}
	raw := []byte(`{"call_id":"c1","tool":"repo.read","args":{"path":"internal/auth/token.go","range":[1,80]}}`)
	for _, c := range []struct {
		name    string
		payload any
	}{{"value", value}, {"json", raw}} {
		b.Run(c.name, func(b *testing.B) {
			d := Draft{RunID: "r", Type: ToolInvoke, Actor: "worker", Payload: c.payload}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Prepare("bench-1", d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChain measures numbering and hashing one prepared event, and
// (lines) also rendering its line, as the SQLite store's callers do.
func BenchmarkChain(b *testing.B) {
	s := newSealer(b)
	p, err := s.Prepare("bench-1", Draft{RunID: "r", Type: ToolInvoke, Actor: "worker", Payload: map[string]any{"call_id": "c1", "tool": "repo.read", "args": map[string]any{"path": "internal/auth/token.go"}}})
	if err != nil {
		b.Fatal(err)
	}
	ps := []Prepared{p}
	b.Run("hash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.Chain(Tip{}, ps)
		}
	})
	b.Run("lines", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s.ChainLines(Tip{}, ps)
		}
	})
}
