package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store/storetest"
)

// writeLegacy writes sessions "one" and "two" (two events each, in the
// order one, two, one, two) into a new database in layout 1 or 2: a row
// per event in an events table, heads in a sessions table (1) or a tips
// table (2).
func writeLegacy(t *testing.T, dir string, sealer *event.Sealer, layout int) map[string][]event.Event {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	heads := `CREATE TABLE tips (session_id TEXT PRIMARY KEY, last_pos INTEGER NOT NULL, first_ts TEXT NOT NULL) WITHOUT ROWID`
	if layout == 1 {
		heads = `CREATE TABLE sessions (session_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, last_hash TEXT NOT NULL, last_pos INTEGER NOT NULL, first_ts TEXT NOT NULL, last_ts TEXT NOT NULL, last_type TEXT NOT NULL) WITHOUT ROWID`
	}
	if _, err := db.Exec(`CREATE TABLE events (pos INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL, prev_pos INTEGER NOT NULL, line BLOB NOT NULL); ` + heads); err != nil {
		t.Fatal(err)
	}
	want := map[string][]event.Event{}
	last := map[string]int64{}
	var pos int64
	for _, sid := range []string{"one", "two", "one", "two"} {
		ps, err := sealer.PrepareAll(sid, []event.Draft{msg(fmt.Sprintf("%s %d", sid, len(want[sid])+1))})
		if err != nil {
			t.Fatal(err)
		}
		tip := event.Tip{}
		if n := len(want[sid]); n > 0 {
			tip = event.Tip{Seq: want[sid][n-1].Seq, Hash: want[sid][n-1].Hash}
		}
		e := sealer.Chain(tip, ps)[0]
		pos++
		if _, err := db.Exec(`INSERT INTO events VALUES (?, ?, ?, ?, ?)`, pos, sid, e.Seq, last[sid], e.Line()); err != nil {
			t.Fatal(err)
		}
		want[sid], last[sid] = append(want[sid], e), pos
	}
	for sid, evs := range want {
		var err error
		if layout == 1 {
			l := evs[len(evs)-1]
			_, err = db.Exec(`INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?)`, sid, l.Seq, l.Hash, last[sid], evs[0].TS, l.TS, l.Type)
		} else {
			_, err = db.Exec(`INSERT INTO tips VALUES (?, ?, ?)`, sid, last[sid], evs[0].TS)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return want
}

// TestMigrationPrefersLayout2Heads: a layout-2 file that still holds a
// stale layout-1 sessions table (left by an interrupted upgrade) migrates
// with layout 2's heads; the stale row would cut "two" back to its first
// event.
func TestMigrationPrefersLayout2Heads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	want := writeLegacy(t, dir, sealer, 2)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(`CREATE TABLE sessions (session_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, last_hash TEXT NOT NULL, last_pos INTEGER NOT NULL, first_ts TEXT NOT NULL, last_ts TEXT NOT NULL, last_type TEXT NOT NULL) WITHOUT ROWID;
		INSERT INTO sessions VALUES ('two', 1, 'stale', 2, '2000-01-01T00:00:00.000000Z', '2000-01-01T00:00:00.000000Z', 'output.message')`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, dir, sealer)
	evs, err := s.Read(ctx, "two", 1)
	if err != nil || len(evs) != 2 || evs[1].Hash != want["two"][1].Hash {
		t.Fatalf("two after migration: %d events, %v; want both", len(evs), err)
	}
	infos, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.FirstTS != want[info.SessionID][0].TS {
			t.Errorf("%s first time %s, want %s from layout 2", info.SessionID, info.FirstTS, want[info.SessionID][0].TS)
		}
	}
}

// TestMigratesOlderLayouts: a database written in layout 1 or 2 opens with
// every session intact, readable and appendable, and its old tables gone.
func TestMigratesOlderLayouts(t *testing.T) {
	for _, layout := range []int{1, 2} {
		t.Run(fmt.Sprint("layout=", layout), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			sealer := storetest.NewSealer(t)
			want := writeLegacy(t, dir, sealer, layout)
			s := mustOpen(t, dir, sealer)
			infos, err := s.Sessions(ctx)
			if err != nil || len(infos) != 2 {
				t.Fatalf("sessions after migration: %+v %v", infos, err)
			}
			for _, info := range infos {
				evs := want[info.SessionID]
				if info.LastSeq != 2 || info.FirstTS != evs[0].TS || info.LastType != event.OutputMessage {
					t.Fatalf("session %+v, want seq 2 from %s", info, evs[0].TS)
				}
			}
			for sid, evs := range want {
				got, err := s.Read(ctx, sid, 1)
				if err != nil || len(got) != 2 || got[0].Hash != evs[0].Hash || got[1].Hash != evs[1].Hash {
					t.Fatalf("%s after migration: %v %v", sid, got, err)
				}
			}
			if _, err := s.Append(ctx, "two", 2, msg("two 3")); err != nil {
				t.Fatal(err)
			}
			if evs, err := s.Read(ctx, "two", 1); err != nil || len(evs) != 3 || evs[2].PrevHash != evs[1].Hash {
				t.Fatalf("two after migration: %v %v", evs, err)
			}
			var old int
			if err := s.db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name IN ('events', 'tips', 'sessions')`).Scan(&old); err != nil || old != 0 {
				t.Fatalf("%d old tables left, %v", old, err)
			}
		})
	}
}

// TestRefusesMixedOrNewerLayouts: a file where an older agentos appended
// rows after the upgrade, or one from a newer layout, is refused with a
// clear error instead of being misread.
func TestRefusesMixedOrNewerLayouts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	s := mustOpen(t, dir, sealer)
	if _, err := s.Append(ctx, "new", 0, msg("new 1")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// An older agentos creates its tables afresh and appends.
	writeLegacy(t, dir, sealer, 2)
	if _, err := Open(dir, sealer, Options{}); err == nil || !strings.Contains(err.Error(), "both the old and the new layout") {
		t.Fatalf("open of a mixed file: %v", err)
	}

	dir = t.TempDir()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, layoutVersion+1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(dir, sealer, Options{}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open of a newer layout: %v", err)
	}
}

// TestHeadsFoldedLazily: heads reach the heads table only every foldEvery
// commits; in between, readers, a reopened store and a second writer find
// them in the tail, with first times of sessions that have no row yet.
func TestHeadsFoldedLazily(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sealer := storetest.NewSealer(t)
	s := mustOpen(t, dir, sealer)
	seqs := map[string]int64{}
	appendTo := func(s *Store, sid string) {
		t.Helper()
		evs, err := s.Append(ctx, sid, seqs[sid], msg(fmt.Sprintf("%s %d", sid, seqs[sid]+1)))
		if err != nil {
			t.Fatal(err)
		}
		seqs[sid] = evs[0].Seq
	}
	folded := func() (pos int64, rows int) {
		t.Helper()
		if err := s.db.QueryRow(`SELECT (SELECT pos FROM folded), (SELECT count(*) FROM heads)`).Scan(&pos, &rows); err != nil {
			t.Fatal(err)
		}
		return pos, rows
	}
	// One commit per append: the first foldEvery-1 leave the table empty.
	for i := 0; i < foldEvery-1; i++ {
		appendTo(s, fmt.Sprintf("s%d", i%3))
	}
	if pos, rows := folded(); pos != 0 || rows != 0 {
		t.Fatalf("folded at %d with %d heads before %d commits", pos, rows, foldEvery)
	}
	check := func(s *Store) {
		t.Helper()
		infos, err := s.Sessions(ctx)
		if err != nil || len(infos) != len(seqs) {
			t.Fatalf("sessions: %+v %v", infos, err)
		}
		for _, info := range infos {
			evs, err := s.Read(ctx, info.SessionID, 1)
			if err != nil || int64(len(evs)) != seqs[info.SessionID] || info.LastSeq != seqs[info.SessionID] || info.FirstTS != evs[0].TS {
				t.Fatalf("%+v: read %d events, %v; want %d", info, len(evs), err, seqs[info.SessionID])
			}
		}
	}
	check(s)
	// Another writer on the same file loads the tail and continues it.
	b := mustOpen(t, dir, sealer)
	appendTo(b, "s1")
	appendTo(s, "s1") // s sees b's commit and re-reads
	check(b)
	appendTo(s, "s3")
	if pos, rows := folded(); pos == 0 || rows == 0 {
		t.Fatalf("not folded after %d commits: pos %d, %d heads", foldEvery+2, pos, rows)
	}
	check(s)
	b.Close()
	s.Close()
	s = mustOpen(t, dir, sealer)
	check(s)
	for sid := range seqs {
		appendTo(s, sid)
	}
	check(s)
}
