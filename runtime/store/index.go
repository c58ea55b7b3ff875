package store

import "math/rand/v2"

// Index keeps sessions in listing order (see List) for the backends that
// hold their session heads in memory (Memory, jsonl): a skip list, so that
// moving a session to the top on append and reading a page are O(log n)
// and O(log n + page) whatever the number of sessions. It is not safe for
// concurrent use; its owner locks it.
type Index struct {
	head  node
	level int
	byID  map[string]*node
}

const maxLevel = 24

type node struct {
	info SessionInfo
	next []*node
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{head: node{next: make([]*node, maxLevel)}, level: 1, byID: map[string]*node{}}
}

// Len is the number of sessions indexed.
func (x *Index) Len() int { return len(x.byID) }

// Get returns a session's entry.
func (x *Index) Get(sessionID string) (SessionInfo, bool) {
	n, ok := x.byID[sessionID]
	if !ok {
		return SessionInfo{}, false
	}
	return n.info, true
}

// before reports whether a comes before b in the listing.
func before(a, b *SessionInfo) bool { return CursorOf(*a).Precedes(CursorOf(*b)) }

// Put inserts or replaces the session's entry.
func (x *Index) Put(info SessionInfo) {
	if old, ok := x.byID[info.SessionID]; ok {
		if CursorOf(old.info) == CursorOf(info) {
			old.info = info
			return
		}
		x.remove(old)
	}
	var update [maxLevel]*node
	p := &x.head
	for l := x.level - 1; l >= 0; l-- {
		for p.next[l] != nil && before(&p.next[l].info, &info) {
			p = p.next[l]
		}
		update[l] = p
	}
	lvl := 1
	for lvl < maxLevel && rand.Uint32()&3 == 0 {
		lvl++
	}
	if lvl > x.level {
		for l := x.level; l < lvl; l++ {
			update[l] = &x.head
		}
		x.level = lvl
	}
	n := &node{info: info, next: make([]*node, lvl)}
	for l := 0; l < lvl; l++ {
		n.next[l] = update[l].next[l]
		update[l].next[l] = n
	}
	x.byID[info.SessionID] = n
}

func (x *Index) remove(n *node) {
	p := &x.head
	for l := x.level - 1; l >= 0; l-- {
		for p.next[l] != nil && p.next[l] != n && before(&p.next[l].info, &n.info) {
			p = p.next[l]
		}
		if p.next[l] == n {
			p.next[l] = n.next[l]
		}
	}
	delete(x.byID, n.info.SessionID)
}

// Page returns up to limit sessions after the cursor, in listing order.
func (x *Index) Page(after Cursor, limit int) []SessionInfo {
	p := &x.head
	if !after.IsZero() {
		for l := x.level - 1; l >= 0; l-- {
			for p.next[l] != nil && !after.Precedes(CursorOf(p.next[l].info)) {
				p = p.next[l]
			}
		}
	}
	var out []SessionInfo
	for n := p.next[0]; n != nil && len(out) < limit; n = n.next[0] {
		out = append(out, n.info)
	}
	return out
}
