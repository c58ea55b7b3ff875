package tracking

import "testing"

func BenchmarkRenderOversized(b *testing.B) {
	v := ViewFromSnapshot(oversized(b), Options{EventsURL: "https://x.example/events"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = Render(v)
		_ = RenderApprovalReview(v)
	}
}
