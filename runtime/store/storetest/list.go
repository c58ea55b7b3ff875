package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/schemas"
)

// clock is a settable time source for a sealer, so that the listing's
// order (by last event time) is the test's to choose, ties included.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// testList: List's pages, walked with their cursors, are the sessions in
// listing order (last time descending, then id descending) with nothing
// repeated or missed, whatever the page size; a session appended to
// between pages moves to the top and is not repeated lower down; bad
// options are refused.
func testList(t *testing.T, open Factory) {
	c := &clock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
	r := redact.New(nil)
	sealer, err := event.NewSealer(schemas.MustDefault(), r, c.now)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, sealer)
	defer s.Close()
	ctx := context.Background()
	if got, err := s.List(ctx, store.ListOptions{}); err != nil || len(got) != 0 {
		t.Fatalf("empty store: %v %v", got, err)
	}
	seqs := map[string]int64{}
	appendAt := func(sid string, at time.Duration) {
		t.Helper()
		c.set(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC).Add(at))
		evs, err := s.Append(ctx, sid, seqs[sid], msg(sid))
		if err != nil {
			t.Fatal(err)
		}
		seqs[sid] = evs[len(evs)-1].Seq
	}
	// 40 sessions, one append each (enough commits for a backend that
	// folds its heads lazily to have folded some), in groups of four
	// sharing a time: ties are ordered by id.
	for i := 0; i < 40; i++ {
		appendAt(fmt.Sprintf("list-%02d", (i*7)%40), time.Duration(i/4)*time.Second)
	}
	// Later activity on a few moves them to the top.
	for i, sid := range []string{"list-05", "list-33", "list-05", "list-12"} {
		appendAt(sid, time.Minute+time.Duration(i)*time.Second)
	}
	want := reference(t, s)
	if len(want) != 40 {
		t.Fatalf("Sessions lists %d sessions, want 40", len(want))
	}
	if want[0].SessionID != "list-12" || want[1].SessionID != "list-05" || want[2].SessionID != "list-33" || want[0].LastSeq != 2 || want[1].LastSeq != 3 {
		t.Fatalf("reference order starts %v", want[:3])
	}
	for _, size := range []int{1, 3, 7, 40, 1000} {
		got := walk(t, s, size, nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("pages of %d:\n got %v\nwant %v", size, ids(got), ids(want))
		}
	}
	if got, err := s.List(ctx, store.ListOptions{}); err != nil || len(got) != 40 {
		t.Fatalf("default limit: %d %v", len(got), err)
	}

	// Activity between pages: the session moves to the top and is not
	// met again further down; the rest keep their order.
	moved := want[20].SessionID
	got := walk(t, s, 5, func(page int) {
		if page == 2 {
			appendAt(moved, 2*time.Minute)
		}
	})
	var rest []store.SessionInfo
	for _, in := range want {
		if in.SessionID != moved {
			rest = append(rest, in)
		}
	}
	if !reflect.DeepEqual(ids(got), ids(rest)) {
		t.Fatalf("pages with activity in between:\n got %v\nwant %v", ids(got), ids(rest))
	}
	top, err := s.List(ctx, store.ListOptions{Limit: 1})
	if err != nil || len(top) != 1 || top[0].SessionID != moved || top[0].LastSeq != seqs[moved] {
		t.Fatalf("after activity, the first page is %v %v", top, err)
	}

	for _, o := range []store.ListOptions{{Limit: -1}, {Limit: store.MaxListLimit + 1}, {Limit: 5, After: store.Cursor{LastTS: "x", SessionID: "../up"}}} {
		if _, err := s.List(ctx, o); err == nil {
			t.Errorf("List(%+v) accepted", o)
		}
	}
	var bad store.Cursor
	bad.SessionID = "list-01"
	if _, err := s.List(ctx, store.ListOptions{After: bad}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a cursor without a time: %v", err)
	}
}

// reference is the listing computed the slow way: every session, sorted.
func reference(t *testing.T, s store.Store) []store.SessionInfo {
	t.Helper()
	all, err := s.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	store.SortForList(all)
	return all
}

// walk reads every page of the given size through encoded cursors,
// calling between (if set) after each page.
func walk(t *testing.T, s store.Store, size int, between func(page int)) []store.SessionInfo {
	t.Helper()
	var out []store.SessionInfo
	cur := ""
	for page := 1; ; page++ {
		after, err := store.ParseCursor(cur)
		if err != nil {
			t.Fatalf("cursor %q: %v", cur, err)
		}
		got, err := s.List(context.Background(), store.ListOptions{Limit: size, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > size {
			t.Fatalf("page of %d holds %d", size, len(got))
		}
		out = append(out, got...)
		if len(got) < size {
			return out
		}
		if page > 100 {
			t.Fatal("the listing does not end")
		}
		cur = store.CursorOf(got[len(got)-1]).Encode()
		if between != nil {
			between(page)
		}
	}
}

func ids(infos []store.SessionInfo) []string {
	out := make([]string, len(infos))
	for i, in := range infos {
		out[i] = in.SessionID
	}
	return out
}

// testScan: Scan delivers the same events as Read, in order, from any
// seq, across the backends' page and chunk sizes; an error from fn stops
// it and is returned; an unknown session has no events.
func testScan(t *testing.T, s store.Store) {
	defer s.Close()
	ctx := context.Background()
	var seq int64
	for seq < 700 {
		drafts := make([]event.Draft, 50)
		for i := range drafts {
			drafts[i] = msg(fmt.Sprint("m", seq+int64(i)+1))
		}
		evs, err := s.Append(ctx, "scan", seq, drafts...)
		if err != nil {
			t.Fatal(err)
		}
		seq = evs[len(evs)-1].Seq
	}
	// Another session interleaved, so that its events sit between.
	if _, err := s.Append(ctx, "scan-other", 0, msg("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "scan", seq, msg("last")); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{0, 1, 256, 257, 513, 700, 701, 702} {
		want, err := s.Read(ctx, "scan", from)
		if err != nil {
			t.Fatal(err)
		}
		var got []event.Event
		if err := s.Scan(ctx, "scan", from, func(e *event.Event) error { got = append(got, *e); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("scan from %d: %d events, read %d", from, len(got), len(want))
		}
		for i := range got {
			if string(got[i].Line()) != string(want[i].Line()) {
				t.Fatalf("scan from %d: event %d differs", from, i)
			}
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := s.Scan(ctx, "scan", 1, func(*event.Event) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("fn's error: %v after %d events", err, n)
	}
	if err := s.Scan(ctx, "no-such-session", 1, func(*event.Event) error { return errors.New("called") }); err != nil {
		t.Fatalf("unknown session: %v", err)
	}
}
