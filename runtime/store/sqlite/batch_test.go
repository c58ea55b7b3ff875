package sqlite

import (
	"errors"
	"testing"
)

// TestBatchIndex: an index decodes to what was encoded, and every
// truncation or contradiction of it is an error, never a panic or a
// silently shorter batch.
func TestBatchIndex(t *testing.T) {
	const pos = 10
	var idx []byte
	idx = appendIndex(idx, "a", 1, 0, 5)
	idx = appendIndex(idx, "bb", 7, 3, 9)
	idx = appendIndex(idx, "a", 2, pos, 4)
	if n, err := countIndex(pos, idx); err != nil || n != 3 {
		t.Fatalf("count: %d %v", n, err)
	}
	e, ok, err := indexAt(pos, idx, pos+2)
	if err != nil || !ok || e != (entry{sid: "a", seq: 2, prev: pos, off: 14, n: 4}) {
		t.Fatalf("entry at %d: %+v %v %v", pos+2, e, ok, err)
	}
	if _, ok, err := indexAt(pos, idx, pos+3); ok || err != nil {
		t.Fatalf("position past the batch: %v %v", ok, err)
	}
	for cut := 1; cut < len(idx); cut++ {
		if _, err := countIndex(pos, idx[:cut]); err == nil && cut != len(appendIndex(nil, "a", 1, 0, 5)) && cut != len(appendIndex(appendIndex(nil, "a", 1, 0, 5), "bb", 7, 3, 9)) {
			t.Errorf("index cut at %d decoded", cut)
		}
	}
	for name, bad := range map[string][]byte{
		"empty":             nil,
		"seq zero":          appendIndex(nil, "a", 0, 0, 1),
		"prev not before":   appendIndex(nil, "a", 1, pos, 1),
		"session too long":  {200, 'a'},
		"varint overflow":   {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"line length huge":  appendIndex(nil, "a", 1, 0, 1<<40),
		"prev in the batch": appendIndex(appendIndex(nil, "a", 1, 0, 1), "a", 2, pos+1, 1),
	} {
		if _, err := countIndex(pos, bad); !errors.Is(err, errIndex) {
			t.Errorf("%s: %v, want a malformed index", name, err)
		}
	}
}

func FuzzBatchIndex(f *testing.F) {
	f.Add(appendIndex(appendIndex(nil, "a", 1, 0, 5), "bb", 7, 3, 9))
	f.Fuzz(func(t *testing.T, idx []byte) {
		n, err := countIndex(100, idx)
		if err != nil {
			return
		}
		for p := int64(100); p < 100+int64(n); p++ {
			if _, ok, err := indexAt(100, idx, p); !ok || err != nil {
				t.Fatalf("position %d of %d: %v %v", p, n, ok, err)
			}
		}
	})
}
