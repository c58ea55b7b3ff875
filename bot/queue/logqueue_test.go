package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func openLog(t *testing.T, dir string, segMax int64) *LogQueue {
	t.Helper()
	q, err := openLogQueue(dir, segMax)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// recordStarts returns the offset of every whole record in a segment and
// the end of the records (zeros may follow).
func recordStarts(t *testing.T, b []byte) (starts []int, end int) {
	t.Helper()
	for end < len(b) {
		if len(b)-end < logHeader {
			t.Fatalf("segment ends inside a header at %d", end)
		}
		n := int(binary.LittleEndian.Uint32(b[end:]))
		if n == 0 {
			if !bytes.Equal(b[end:], make([]byte, len(b)-end)) {
				t.Fatalf("garbage after the records at %d", end)
			}
			break
		}
		starts = append(starts, end)
		end += logHeader + n
	}
	return starts, end
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+logSegmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLogQueueTornTail: the last record cut at every byte offset, or with
// any byte of it flipped, is dropped on reopen (and cut from the file);
// every record before it is kept, and the queue appends after the cut.
func TestLogQueueTornTail(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	q := openLog(t, src, defaultSegment)
	enqueue(t, q, "a")
	enqueue(t, q, "b")
	claim(t, q) // a and b
	if err := q.Done(ctx, "a", OutcomeProcessed, ""); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, "c") // the last record
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// The claim took a and b; b was never handed out, so Close appended a
	// release record for it. Drop that record so that c's put is last (b
	// then reopens as claimed once: pending after 1 attempt).
	segs := segmentFiles(t, src)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	full, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	starts, end := recordStarts(t, full)
	full = full[:end]
	lastType := func(i int) byte { return full[starts[i]+logHeader] }
	if lastType(len(starts)-1) == recRelease {
		full, starts = full[:starts[len(starts)-1]], starts[:len(starts)-1]
	}
	if lastType(len(starts)-1) != recPutFailures {
		t.Fatalf("last record is type %d, want put", lastType(len(starts)-1))
	}
	last := starts[len(starts)-1]

	check := func(t *testing.T, data []byte) {
		t.Helper()
		dir := t.TempDir()
		name := filepath.Join(dir, filepath.Base(segs[0]))
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
		q := openLog(t, dir, defaultSegment)
		if st, err := os.Stat(name); err != nil || st.Size() != int64(last) {
			t.Fatalf("segment size after open = %v, %v; want %d (cut at the torn record)", st.Size(), err, last)
		}
		if r, ok, err := q.Get(ctx, "a"); err != nil || !ok || r.State != "done" || string(r.Body) != `{"id":"a"}` {
			t.Errorf("a = %+v, %v, %v; want done", r, ok, err)
		}
		if r, ok, err := q.Get(ctx, "b"); err != nil || !ok || r.State != "pending" || r.Attempts != 1 || string(r.Body) != `{"id":"b"}` {
			t.Errorf("b = %+v, %v, %v; want pending after 1 attempt", r, ok, err)
		}
		if _, ok, _ := q.Get(ctx, "c"); ok {
			t.Error("the torn record c was kept")
		}
		if n, _ := q.Depth(ctx); n != 1 {
			t.Errorf("Depth = %d, want 1", n)
		}
		// Appending after the cut works and survives a reopen.
		enqueue(t, q, "c")
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		q2 := openLog(t, dir, defaultSegment)
		if r, ok, err := q2.Get(ctx, "c"); err != nil || !ok || string(r.Body) != `{"id":"c"}` {
			t.Errorf("c after re-append and reopen = %+v, %v, %v", r, ok, err)
		}
	}
	for cut := last; cut < len(full); cut++ {
		t.Run(fmt.Sprint("cut-", cut-last), func(t *testing.T) { check(t, full[:cut]) })
	}
	for i := last; i < len(full); i++ {
		t.Run(fmt.Sprint("flip-", i-last), func(t *testing.T) {
			data := bytes.Clone(full)
			data[i] ^= 0x5a
			check(t, data)
		})
	}
	t.Run("zeros", func(t *testing.T) { // a file extended but never written
		check(t, append(bytes.Clone(full[:last]), make([]byte, 4096)...))
	})
}

// TestLogQueueCorruptSealedSegment: damage before the last segment is not
// a torn write; opening refuses instead of silently dropping data.
func TestLogQueueCorruptSealedSegment(t *testing.T) {
	dir := t.TempDir()
	q := openLog(t, dir, 1) // a new segment for every batch
	enqueue(t, q, "a")
	enqueue(t, q, "b")
	q.Close()
	segs := segmentFiles(t, dir)
	if len(segs) < 2 {
		t.Fatalf("segments %v, want at least two", segs)
	}
	data, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(segs[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	if q, err := OpenLogQueue(dir); err == nil || !strings.Contains(err.Error(), "sealed segment") {
		if err == nil {
			q.Close()
		}
		t.Errorf("OpenLogQueue = %v, want a corrupt sealed segment error", err)
	}
}

// TestLogQueueRotateAndPrune: with small segments, pruning forgets the
// finished deliveries, moves the live one forward and deletes the old
// segments; everything still stored survives a reopen, body included.
func TestLogQueueRotateAndPrune(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q := openLog(t, dir, 4096)
	body := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 1000+i) }
	const n = 60
	for i := range n {
		if _, err := q.Enqueue(ctx, Delivery{ID: fmt.Sprint("d", i), Event: "issue_comment", Body: body(i)}); err != nil {
			t.Fatal(err)
		}
	}
	before := len(segmentFiles(t, dir))
	if before < 10 {
		t.Fatalf("%d segments, want rotation", before)
	}
	// Finish all but d3 (claimed, then retried: pending) and d7 (pending).
	for {
		d, ok := claim(t, q)
		if !ok {
			break
		}
		outcome := OutcomeProcessed
		if d.ID == "d3" {
			outcome = OutcomeRetry
		}
		if d.ID == "d7" {
			continue // claimed, never finished: stays claimed
		}
		if err := q.Done(ctx, d.ID, outcome, ""); err != nil {
			t.Fatal(err)
		}
	}
	pruned, err := q.Prune(ctx, time.Now().Add(time.Minute))
	if err != nil || pruned != n-2 {
		t.Fatalf("Prune = %d, %v; want %d", pruned, err, n-2)
	}
	// d7 is claimed, so it (and the segments from its own on) stay; a
	// second prune after it is finished can move d3 and delete the rest.
	if err := q.Done(ctx, "d7", OutcomeFailed, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Prune(ctx, time.Unix(0, 1)); err != nil { // forgets nothing, compacts
		t.Fatal(err)
	}
	after := len(segmentFiles(t, dir))
	if after > 2 {
		t.Errorf("%d segments after prune (from %d), want at most 2", after, before)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q2 := openLog(t, dir, 4096)
	for _, tc := range []struct {
		id, state string
		attempts  int
	}{{"d3", "pending", 1}, {"d7", "done", 1}} {
		r, ok, err := q2.Get(ctx, tc.id)
		i := int(tc.id[1] - '0')
		if err != nil || !ok || r.State != tc.state || r.Attempts != tc.attempts || !bytes.Equal(r.Body, body(i)) {
			t.Errorf("%s after reopen = %s/%d body %d bytes, %v, %v; want %s/%d", tc.id, r.State, r.Attempts, len(r.Body), ok, err, tc.state, tc.attempts)
		}
	}
	if _, ok, _ := q2.Get(ctx, "d10"); ok {
		t.Error("pruned d10 came back after reopen")
	}
	if dup, err := q2.Enqueue(ctx, Delivery{ID: "d10", Event: "issue_comment", Body: []byte(`{}`)}); err != nil || dup {
		t.Errorf("Enqueue of pruned d10 = %v, %v; want new", dup, err)
	}
	if n, _ := q2.Depth(ctx); n != 2 {
		t.Errorf("Depth = %d, want 2 (d3, d10)", n)
	}
}

// TestLogQueueConcurrent: producers enqueue (each ID twice) while workers
// claim and finish (retrying some once); every delivery ends done exactly
// once, also after a reopen. Run with -race.
func TestLogQueueConcurrent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q := openLog(t, dir, 64<<10)
	now := time.Unix(1_700_000_000, 0)
	var clockMu sync.Mutex
	q.now = func() time.Time { // jumps past any backoff
		clockMu.Lock()
		defer clockMu.Unlock()
		now = now.Add(time.Hour)
		return now
	}
	const producers, perProducer, workers = 8, 100, 4
	var finals sync.Map
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProducer {
				id := fmt.Sprintf("p%d-%d", p, i)
				for range 2 {
					if _, err := q.Enqueue(ctx, Delivery{ID: id, Event: "issue_comment", Body: []byte(id)}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	var ww sync.WaitGroup
	for range workers {
		ww.Add(1)
		go func() {
			defer ww.Done()
			for {
				d, ok, err := q.Claim(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
						continue
					}
				}
				if string(d.Body) != d.ID {
					t.Errorf("body of %s = %q", d.ID, d.Body)
				}
				outcome := OutcomeProcessed
				if strings.HasSuffix(d.ID, "7") && d.Attempts == 1 {
					outcome = OutcomeRetry
				} else if _, dup := finals.LoadOrStore(d.ID, true); dup {
					t.Errorf("%s finished twice", d.ID)
				}
				if err := q.Done(ctx, d.ID, outcome, ""); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	waitDrained(t, q)
	close(stop)
	ww.Wait()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q2 := openLog(t, dir, 64<<10)
	if n, _ := q2.Depth(ctx); n != 0 {
		t.Errorf("Depth after reopen = %d, want 0", n)
	}
	for p := range producers {
		for i := range perProducer {
			id := fmt.Sprintf("p%d-%d", p, i)
			r, ok, err := q2.Get(ctx, id)
			want := 1
			if strings.HasSuffix(id, "7") {
				want = 2
			}
			if err != nil || !ok || r.State != "done" || r.Attempts != want {
				t.Errorf("%s = %s attempts %d, %v, %v; want done after %d", id, r.State, r.Attempts, ok, err, want)
			}
		}
	}
}

// TestLogQueueFailedWriteIsSticky: once a write fails, nothing more is
// acknowledged.
func TestLogQueueFailedWriteIsSticky(t *testing.T) {
	q := openLog(t, t.TempDir(), defaultSegment)
	enqueue(t, q, "a")
	// Make the segment unwritable under the writer: close its file.
	q.filesMu.Lock()
	q.files[q.active].Close()
	q.filesMu.Unlock()
	for _, id := range []string{"b", "c"} {
		if _, err := q.Enqueue(context.Background(), Delivery{ID: id, Event: "issue_comment", Body: []byte(`{}`)}); err == nil {
			t.Errorf("Enqueue(%s) after a failed write succeeded", id)
		}
	}
	if _, _, err := q.Claim(context.Background()); err == nil {
		t.Error("Claim after a failed write succeeded")
	}
}

// TestLogQueueReadsDuringCompaction: Get and Claim read the right body
// while Prune moves bodies forward and deletes the segments they were in.
func TestLogQueueReadsDuringCompaction(t *testing.T) {
	ctx := context.Background()
	q := openLog(t, t.TempDir(), 2048)
	body := func(id string) []byte { return []byte(strings.Repeat(id+";", 100)) }
	var ids []string
	add := func(n int) {
		for range n {
			id := fmt.Sprint("m", len(ids))
			if _, err := q.Enqueue(ctx, Delivery{ID: id, Event: "issue_comment", Body: body(id)}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	add(40)
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	known := append([]string(nil), ids...)
	go func() {
		defer close(readerDone)
		for {
			for _, id := range known {
				select {
				case <-stop:
					return
				default:
				}
				r, ok, err := q.Get(ctx, id)
				if err != nil || !ok || !bytes.Equal(r.Body, body(id)) {
					t.Errorf("Get(%s) during compaction = %d bytes, %v, %v", id, len(r.Body), ok, err)
					return
				}
			}
		}
	}()
	for range 20 {
		add(5)
		if _, err := q.Prune(ctx, time.Unix(0, 1)); err != nil { // forgets nothing, moves everything old
			t.Fatal(err)
		}
	}
	close(stop)
	<-readerDone
	got := 0
	for {
		d, ok := claim(t, q)
		if !ok {
			break
		}
		if !bytes.Equal(d.Body, body(d.ID)) {
			t.Errorf("claimed %s with body %q", d.ID, d.Body)
		}
		got++
	}
	if got != len(ids) {
		t.Errorf("claimed %d deliveries, want %d", got, len(ids))
	}
}
