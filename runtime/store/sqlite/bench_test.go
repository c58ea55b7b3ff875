package sqlite

import (
	"fmt"
	"testing"

	"github.com/agentos/agentos/runtime/store/storetest"
)

// BenchmarkAppend compares group commit with one transaction (one fsync)
// per event, for 1 and 64 concurrent sessions.
func BenchmarkAppend(b *testing.B) {
	for _, sessions := range []int{1, 64} {
		for _, group := range []bool{true, false} {
			name := fmt.Sprintf("sessions=%d/group=%v", sessions, group)
			b.Run(name, func(b *testing.B) {
				s, err := Open(b.TempDir(), storetest.NewSealer(b), Options{NoGroupCommit: !group})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				storetest.BenchAppend(b, s, sessions)
			})
		}
	}
}
