package api

import "testing"

// BenchmarkEventsStream measures delivering a finished session's log over
// SSE through a real HTTP connection: b.N events read by one client, from
// the first to session.close.
func BenchmarkEventsStream(b *testing.B) {
	env := newTestEnv(b, Options{})
	drafts := startDrafts("r1", "bench")
	for i := 0; i < b.N; i++ {
		drafts = append(drafts, deltaDraft("r1", i))
	}
	mustAppend(b, env.store, "bench", append(drafts, endDrafts("r1")...)...)
	b.ResetTimer()
	s := env.openStream(b, "bench", 0, "")
	n := 0
	for {
		if _, ok := s.next(b); !ok {
			break
		}
		n++
	}
	b.StopTimer()
	if want := b.N + 5; n != want {
		b.Fatalf("read %d events, want %d", n, want)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}
