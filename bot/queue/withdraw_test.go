package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWithdraw runs the withdrawal tests against every implementation.
func TestWithdraw(t *testing.T) {
	for _, qs := range queueImpls {
		t.Run(qs.name, func(t *testing.T) {
			impl := queueImpl{qs.name, qs.setup(t)}
			t.Run("States", func(t *testing.T) { testWithdrawStates(t, impl) })
			t.Run("RacesClaim", func(t *testing.T) { testWithdrawRacesClaim(t, impl) })
		})
	}
}

// testWithdrawStates: a waiting delivery (new, taken into a claim batch
// but not handed out, or waiting for a retry) is withdrawn and never
// claimed again, also after a restart; a claimed one is reported and left
// to its worker; deliveries after the bound and those match refuses are
// untouched.
func testWithdrawStates(t *testing.T, impl queueImpl) {
	q, reopen := impl.open(t)
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	q.setNow(func() time.Time { return now })

	enqueue(t, q, "b")
	if d, _ := claim(t, q); d.ID != "b" {
		t.Fatalf("claimed %q, want b", d.ID)
	}
	if err := q.Done(ctx, "b", OutcomeRetry, "boom"); err != nil { // b waits for its retry
		t.Fatal(err)
	}
	for _, id := range []string{"c", "a", "d"} {
		enqueue(t, q, id)
	}
	if d, _ := claim(t, q); d.ID != "c" { // the log queue takes a and d into memory too
		t.Fatalf("claimed %q, want c", d.ID)
	}
	enqueue(t, q, "x") // the cancel
	enqueue(t, q, "e") // after it

	var seen []string
	match := func(d Delivery) bool {
		seen = append(seen, d.ID)
		return d.ID != "d" && string(d.Body) == `{"id":"`+d.ID+`"}`
	}
	ws, err := q.(Withdrawer).Withdraw(ctx, "x", match, "cancelled by @maintainer")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range ws {
		got = append(got, fmt.Sprintf("%s:%v", w.ID, w.Withdrawn))
	}
	if want := "[b:true c:false a:true]"; fmt.Sprint(got) != want {
		t.Errorf("withdrawals %v, want %s", got, want)
	}
	if want := "[b c a d]"; fmt.Sprint(seen) != want {
		t.Errorf("match saw %v, want %s (open deliveries before x, oldest first)", seen, want)
	}
	for _, id := range []string{"a", "b"} {
		rec, ok, err := q.Get(ctx, id)
		if err != nil || !ok || rec.State != "done" || rec.Outcome != OutcomeWithdrawn || rec.Error != "cancelled by @maintainer" {
			t.Errorf("%s: %+v, %v, %v; want done, withdrawn", id, rec, ok, err)
		}
	}
	now = now.Add(30 * time.Second) // b's retry would be due; c's claim (60 s) has not expired
	var claimed []string
	for {
		d, ok := claim(t, q)
		if !ok {
			break
		}
		claimed = append(claimed, d.ID)
		if err := q.Done(ctx, d.ID, OutcomeProcessed, ""); err != nil {
			t.Fatal(err)
		}
	}
	if want := "[d x e]"; fmt.Sprint(claimed) != want {
		t.Errorf("claimed after the withdrawal %v, want %s", claimed, want)
	}
	if err := q.Done(ctx, "c", OutcomeProcessed, ""); err != nil {
		t.Errorf("the worker of c finishing it: %v", err)
	}
	if n, err := q.Depth(ctx); err != nil || n != 0 {
		t.Errorf("Depth = %d, %v; want 0", n, err)
	}
	if ws, err := q.(Withdrawer).Withdraw(ctx, "", func(Delivery) bool { return true }, "again"); err != nil || len(ws) != 0 {
		t.Errorf("a second withdrawal found %v, %v; want nothing open", ws, err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	q2 := reopen()
	for _, id := range []string{"a", "b"} {
		if rec, ok, err := q2.Get(ctx, id); err != nil || !ok || rec.Outcome != OutcomeWithdrawn {
			t.Errorf("%s after restart: %+v, %v, %v", id, rec, ok, err)
		}
	}
	if d, ok := claim(t, q2); ok {
		t.Errorf("claimed %s after restart; want nothing", d.ID)
	}
}

// testWithdrawRacesClaim: workers claim while a cancel withdraws the same
// deliveries; each ends either withdrawn (and never handed to a worker) or
// handed to a worker (and reported claimed), never both, never neither.
func testWithdrawRacesClaim(t *testing.T, impl queueImpl) {
	q, _ := impl.open(t)
	ctx := context.Background()
	const n = 60
	for i := range n {
		enqueue(t, q, fmt.Sprintf("r%02d", i))
	}
	var mu sync.Mutex
	worked := map[string]bool{}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
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
				mu.Lock()
				worked[d.ID] = true
				mu.Unlock()
				time.Sleep(2 * time.Millisecond) // some work, so that the withdrawals meet claims
				if err := q.Done(ctx, d.ID, OutcomeProcessed, ""); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for { // let the workers start
		mu.Lock()
		k := len(worked)
		mu.Unlock()
		if k >= 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	withdrawn := map[string]bool{}
	reported := map[string]bool{}
	for range 3 {
		ws, err := q.(Withdrawer).Withdraw(ctx, "", func(d Delivery) bool { return strings.HasPrefix(d.ID, "r") }, "cancelled")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			reported[w.ID] = true
			if w.Withdrawn {
				withdrawn[w.ID] = true
			}
		}
	}
	close(stop)
	wg.Wait()
	for i := range n {
		id := fmt.Sprintf("r%02d", i)
		rec, _, err := q.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case withdrawn[id] && worked[id]:
			t.Errorf("%s was withdrawn and handed to a worker", id)
		case withdrawn[id] != (rec.Outcome == OutcomeWithdrawn):
			t.Errorf("%s: withdrawn %v, stored outcome %q", id, withdrawn[id], rec.Outcome)
		case !withdrawn[id] && !worked[id]:
			t.Errorf("%s neither withdrawn nor worked: %+v", id, rec)
		}
	}
	t.Logf("%d of %d withdrawn, %d worked, %d reported", len(withdrawn), n, len(worked), len(reported))
}
