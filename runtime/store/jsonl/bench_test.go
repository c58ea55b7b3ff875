package jsonl

import (
	"fmt"
	"testing"

	"github.com/agentos/agentos/runtime/store/storetest"
)

// BenchmarkAppend is the JSONL store's durable append (write + fsync per
// append, per session file).
func BenchmarkAppend(b *testing.B) {
	for _, sessions := range []int{1, 64} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			s, err := Open(b.TempDir(), storetest.NewSealer(b))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchAppend(b, s, sessions, 1)
		})
	}
}
