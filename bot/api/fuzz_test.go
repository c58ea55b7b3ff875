package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzEventsResume sends any Last-Event-ID (or ?after= when the text
// cannot travel in a header) to the events stream of a finished session of
// five events. A non-negative integer n resumes exactly after n: events
// n+1..5 in order, no gap, no duplicate; n = 5 is 204 (EventSource stops);
// anything else is 400 with nothing streamed.
func FuzzEventsResume(f *testing.F) {
	for _, s := range []string{"", "0", "3", "7", "8", "-1", " 2 ", "+3", "0x3", "1e2", "9223372036854775807", "99999999999999999999", "３"} {
		f.Add(s)
	}
	env := newTestEnv(f, Options{Token: testToken})
	mustAppend(f, env.store, "s1", append(startDrafts("r1", "p"), endDrafts("r1")...)...)
	const total = 5
	f.Fuzz(func(t *testing.T, last string) {
		target := env.srv.URL + "/v1/runs/s1/events"
		inHeader := httpguts.ValidHeaderFieldValue(last)
		if !inHeader {
			target += "?after=" + url.QueryEscape(last)
		}
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		if inHeader {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		frames := make(chan frame, 64)
		go readFrames(resp.Body, frames)
		var ids []int64
		for fr := range frames {
			if fr.typ != "" {
				ids = append(ids, fr.id)
			}
		}

		v := last
		if inHeader {
			v = strings.TrimSpace(last)
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if v == "" {
			n, perr = 0, nil
		}
		switch {
		case perr != nil || n < 0 || n > total:
			if resp.StatusCode != http.StatusBadRequest || len(ids) != 0 {
				t.Fatalf("Last-Event-ID %q: %d with %d events, want 400", last, resp.StatusCode, len(ids))
			}
		case n == total:
			if resp.StatusCode != http.StatusNoContent || len(ids) != 0 {
				t.Fatalf("Last-Event-ID %q: %d with %d events, want 204", last, resp.StatusCode, len(ids))
			}
		default:
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("Last-Event-ID %q: %d, want 200", last, resp.StatusCode)
			}
			if len(ids) != int(total-n) {
				t.Fatalf("Last-Event-ID %q: ids %v, want %d..%d", last, ids, n+1, total)
			}
			for i, id := range ids {
				if id != n+1+int64(i) {
					t.Fatalf("Last-Event-ID %q: ids %v, want %d..%d", last, ids, n+1, total)
				}
			}
		}
	})
}
