package testenv

import (
	"errors"
	"testing"
)

// recorder is a testing.TB that records how the test would have ended.
type recorder struct {
	testing.TB
	failed, skipped bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Skipf(string, ...any)  { r.skipped = true }

func TestRequire(t *testing.T) {
	missing := errors.New("not found")
	for _, c := range []struct {
		ci            string
		err           error
		fail, skipped bool
	}{
		{"true", nil, false, false},
		{"", nil, false, false},
		{"true", missing, true, false},
		{"", missing, false, true},
		{"false", missing, false, true},
	} {
		t.Setenv("CI", c.ci)
		r := &recorder{TB: t}
		Require(r, "git", c.err)
		if r.failed != c.fail || r.skipped != c.skipped {
			t.Errorf("CI=%q err=%v: failed=%v skipped=%v, want %v %v", c.ci, c.err, r.failed, r.skipped, c.fail, c.skipped)
		}
	}
}
