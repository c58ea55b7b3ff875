package store_test

import (
	"encoding/base64"
	"errors"
	"testing"

	"github.com/agentos/agentos/runtime/store"
)

// TestCursor: a cursor survives Encode/ParseCursor, and a string this
// package did not produce is ErrBadCursor, not a position.
func TestCursor(t *testing.T) {
	c := store.Cursor{LastTS: "2026-11-28T23:59:01.123456Z", SessionID: "sess-1.a_b"}
	got, err := store.ParseCursor(c.Encode())
	if err != nil || got != c {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if got, err := store.ParseCursor(""); err != nil || !got.IsZero() {
		t.Fatalf("empty cursor: %+v %v", got, err)
	}
	enc := func(s string) string { return "c1." + b64(s) }
	for _, bad := range []string{
		"garbage", "c1.!!!", b64(c.LastTS + "\x00" + c.SessionID),
		enc("2026-11-28T23:59:01Z\x00sess"), enc("2026-11-28T23:59:01.123456Z\x00../etc"),
		enc("2026-11-28T23:59:01.123456Z"), enc("2026-13-28T23:59:01.123456Z\x00s"),
	} {
		if _, err := store.ParseCursor(bad); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("ParseCursor(%q): %v", bad, err)
		}
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
