package jsonl

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/storetest"
)

func msg(text string) event.Draft {
	return event.Draft{RunID: "r", Type: event.OutputMessage, Actor: "worker", Payload: map[string]any{"text": text}}
}

// TestListFromFiles: a store opened on existing logs lists them from each
// log's first and last line (a checkpoint-sized last line included, and a
// torn tail ignored), and a session another store creates in the same
// directory shows up on the next List.
func TestListFromFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	a, err := Open(dir, sealer)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 12; i++ {
		sid := fmt.Sprintf("f%02d", i%5)
		evs, _ := a.Read(ctx, sid, 1)
		text := "x"
		if i == 11 {
			text = strings.Repeat("long ", 40000) // longer than a read chunk
		}
		if _, err := a.Append(ctx, sid, int64(len(evs)), msg(text)); err != nil {
			t.Fatal(err)
		}
	}
	want, err := a.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store.SortForList(want)
	a.Close()
	// A torn tail (a crash mid-write) does not count.
	f, err := os.OpenFile(a.Path("f03"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"torn`)
	f.Close()

	b, err := Open(dir, sealer)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := b.List(ctx, store.ListOptions{Limit: 100})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("list of a reopened store:\n got %v %v\nwant %v", got, err, want)
	}
	c, err := Open(dir, sealer)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Append(ctx, "from-another", 0, msg("hi")); err != nil {
		t.Fatal(err)
	}
	got, err = b.List(ctx, store.ListOptions{Limit: 1})
	if err != nil || len(got) != 1 || got[0].SessionID != "from-another" {
		t.Fatalf("a session created by another store: %v %v", got, err)
	}
}
