package store

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentos/agentos/runtime/event"
)

// Listing sessions: newest activity first, by (LastTS, SessionID)
// descending, a page at a time. A page starts strictly after a Cursor (the
// key of the previous page's last session), so the cost of a page does not
// grow with the number of sessions stored (keyset pagination: every
// backend keeps an index in this order), and pages stay stable while new
// activity arrives at the top. A session appended to after a page was
// read moves to the top and is not repeated further down.

// ListOptions select one page of sessions.
type ListOptions struct {
	// Limit is the most sessions returned: 1..MaxListLimit, 0 for
	// DefaultListLimit.
	Limit int
	// After is the key of the last session of the previous page; zero
	// for the first page.
	After Cursor
}

// Page sizes of List.
const (
	DefaultListLimit = 50
	MaxListLimit     = 1000
)

// Cursor is a position in the listing order.
type Cursor struct {
	LastTS    string
	SessionID string
}

// CursorOf is the key of a session in the listing order.
func CursorOf(in SessionInfo) Cursor { return Cursor{LastTS: in.LastTS, SessionID: in.SessionID} }

// IsZero reports whether c is the start of the listing.
func (c Cursor) IsZero() bool { return c == Cursor{} }

// Precedes reports whether the session keyed k comes after c in the
// listing (strictly older activity, or the same time and a smaller id).
// The zero cursor precedes every session.
func (c Cursor) Precedes(k Cursor) bool {
	if c.IsZero() {
		return true
	}
	if k.LastTS != c.LastTS {
		return k.LastTS < c.LastTS
	}
	return k.SessionID < c.SessionID
}

// ErrBadCursor is returned for a cursor string this package did not
// produce (or one edited since).
var ErrBadCursor = errors.New("cursor is not one this server handed out")

const cursorPrefix = "c1."

// Encode returns the cursor as an opaque URL-safe string.
func (c Cursor) Encode() string {
	if c.IsZero() {
		return ""
	}
	return cursorPrefix + base64.RawURLEncoding.EncodeToString([]byte(c.LastTS+"\x00"+c.SessionID))
}

// ParseCursor decodes Encode's string ("" is the zero cursor). Anything
// else — another encoding, a time that is not event.TimeFormat, an
// invalid session id — is ErrBadCursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	rest, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok || len(rest) > 512 {
		return Cursor{}, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return Cursor{}, ErrBadCursor
	}
	ts, sid, ok := strings.Cut(string(b), "\x00")
	if !ok || !event.ValidSessionID(sid) {
		return Cursor{}, ErrBadCursor
	}
	if t, err := time.Parse(event.TimeFormat, ts); err != nil || t.Format(event.TimeFormat) != ts {
		return Cursor{}, ErrBadCursor
	}
	return Cursor{LastTS: ts, SessionID: sid}, nil
}

// Check validates options and applies the default limit.
func (o ListOptions) Check() (ListOptions, error) {
	if o.Limit == 0 {
		o.Limit = DefaultListLimit
	}
	if o.Limit < 1 || o.Limit > MaxListLimit {
		return o, fmt.Errorf("list sessions: limit %d is not 1-%d", o.Limit, MaxListLimit)
	}
	if !o.After.IsZero() && (o.After.LastTS == "" || !event.ValidSessionID(o.After.SessionID)) {
		return o, fmt.Errorf("list sessions: %w", ErrBadCursor)
	}
	return o, nil
}

// SortForList sorts sessions in listing order.
func SortForList(infos []SessionInfo) {
	sort.Slice(infos, func(i, j int) bool { return CursorOf(infos[i]).Precedes(CursorOf(infos[j])) })
}

// PageOf returns the page o selects from infos, which must be in listing
// order.
func PageOf(infos []SessionInfo, o ListOptions) []SessionInfo {
	i := sort.Search(len(infos), func(i int) bool { return o.After.Precedes(CursorOf(infos[i])) })
	infos = infos[i:]
	if len(infos) > o.Limit {
		infos = infos[:o.Limit]
	}
	return append([]SessionInfo(nil), infos...)
}
