package queue

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLogQueueAcksAfterSync: with the commit delay batching concurrent
// deliveries, an Enqueue returns only after the fdatasync that covers its
// record.
func TestLogQueueAcksAfterSync(t *testing.T) {
	ctx := context.Background()
	q, err := openLogQueueWith(t.TempDir(), 64<<10, LogOptions{CommitDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	type mark struct {
		seg uint64
		off int64
	}
	var synced atomic.Pointer[mark]
	synced.Store(&mark{})
	var syncs atomic.Int64
	q.syncData = func(f *os.File) error { // runs in the writer goroutine
		err := fdatasync(f)
		if err == nil {
			synced.Store(&mark{q.active, q.off})
			syncs.Add(1)
		}
		return err
	}
	const producers, each = 16, 50
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("p%d-%d", p, i)
				if _, err := q.Enqueue(ctx, Delivery{ID: id, Event: "issue_comment", Body: []byte(id)}); err != nil {
					t.Error(err)
					return
				}
				m := synced.Load()
				q.idxMu.Lock()
				e := q.index[id]
				q.idxMu.Unlock()
				if e == nil {
					t.Errorf("%s: acknowledged but not stored", id)
					return
				}
				if e.seg > m.seg || e.seg == m.seg && e.bodyOff+int64(e.bodyLen) > m.off {
					t.Errorf("%s acknowledged before its sync: record ends at %d:%d, synced up to %d:%d",
						id, e.seg, e.bodyOff+int64(e.bodyLen), m.seg, m.off)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := syncs.Load(); n == 0 || n >= producers*each {
		t.Errorf("%d syncs for %d deliveries: want them shared", n, producers*each)
	}
}
