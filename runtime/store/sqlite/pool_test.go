package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/storetest"
)

// TestConcurrentFirstReads: 256 goroutines read a freshly opened store at
// once, so that every reader's statements are prepared for the first time
// while the others hold connections. Each read needs exactly one pooled
// connection; before the reader pool, a read held a connection in its
// transaction while preparing a statement needed a second, and 64
// concurrent first reads deadlocked. The deadline only turns a hang into a
// failure with the goroutines' state.
func TestConcurrentFirstReads(t *testing.T) {
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	const sessions = 8
	w := mustOpen(t, dir, sealer)
	ctx := context.Background()
	for i := 0; i < sessions; i++ {
		if _, err := w.Append(ctx, fmt.Sprintf("s%d", i), 0, event.Draft{RunID: "r", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	s := mustOpen(t, dir, sealer)
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	const readers = 256
	start := make(chan struct{})
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			sid := fmt.Sprintf("s%d", i%sessions)
			var err error
			switch i % 4 {
			case 0, 1:
				var evs []event.Event
				evs, err = s.Read(ctx, sid, 1)
				if err == nil && len(evs) != 1 {
					err = fmt.Errorf("%s: %d events", sid, len(evs))
				}
			case 2:
				_, err = s.Sessions(ctx)
			case 3:
				_, err = s.List(ctx, store.ListOptions{Limit: 5})
			}
			errs <- err
		}(i)
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
