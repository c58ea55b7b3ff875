package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/storetest"
)

// TestMigratesLayout3Heads: a layout-3 database (heads without last_ts,
// no activity index) opens as layout 4 with every head's last time filled
// from its last event, so that List orders it exactly as Sessions does.
func TestMigratesLayout3Heads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	s := mustOpen(t, dir, sealer)
	for i := 0; i < 60; i++ { // past several folds
		sid := fmt.Sprintf("m%02d", i%20)
		evs, err := s.Read(ctx, sid, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(ctx, sid, int64(len(evs)), msg(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	db := rawDB(t, dir)
	for _, q := range []string{`DROP INDEX heads_by_activity`, `ALTER TABLE heads DROP COLUMN last_ts`, `PRAGMA user_version = 3`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	db.Close()

	s = mustOpen(t, dir, sealer)
	var version, empty int
	if err := s.db.QueryRow(`SELECT (SELECT user_version FROM pragma_user_version), (SELECT count(*) FROM heads WHERE last_ts = '')`).Scan(&version, &empty); err != nil || version != layoutVersion || empty != 0 {
		t.Fatalf("after migration: version %d, %d heads without a time, %v", version, empty, err)
	}
	want, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store.SortForList(want)
	got, err := s.List(ctx, store.ListOptions{Limit: 100})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("list after migration:\n got %v %v\nwant %v", got, err, want)
	}
}

func rawDB(t *testing.T, dir string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return db
}
