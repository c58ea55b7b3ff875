package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/access"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/sqlite"
	"github.com/gin-gonic/gin"
)

// TestListPages: GET /v1/runs walked with next_cursor returns every
// session once, newest activity first, whatever the page size, with and
// without a state filter; a cursor the server did not hand out is 400
// bad_cursor.
func TestListPages(t *testing.T) {
	env := newTestEnv(t, Options{})
	var paused []string
	for i := 0; i < 23; i++ {
		sid := fmt.Sprintf("list-%02d", i)
		run := "r" + sid
		drafts := startDrafts(run, "prompt "+sid)
		if i%3 == 0 {
			drafts = append(drafts, pauseDrafts(run, "ap-"+sid)...)
			paused = append(paused, sid)
		} else {
			drafts = append(drafts, endDrafts(run)...)
		}
		mustAppend(t, env.store, sid, drafts...)
	}
	infos, err := env.store.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	store.SortForList(infos)
	var all []string
	for _, in := range infos {
		all = append(all, in.SessionID)
	}
	var wantPaused []string
	for _, sid := range all {
		for _, p := range paused {
			if p == sid {
				wantPaused = append(wantPaused, sid)
			}
		}
	}
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"limit=5", all}, {"limit=1", all}, {"limit=200", all}, {"", all},
		{"limit=2&state=paused", wantPaused}, {"state=completed&limit=50", without(all, wantPaused)},
	} {
		if got := env.walkRuns(t, tc.query); strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s:\n got %v\nwant %v", tc.query, got, tc.want)
		}
	}
	for _, bad := range []string{"garbage", "MjAyNgBzZXNz", store.Cursor{LastTS: "2026-11-28T23:59:01.123456Z", SessionID: "x"}.Encode() + "%21"} {
		r := env.do(t, http.MethodGet, "/v1/runs?cursor="+bad, "", "")
		if r.status != http.StatusBadRequest || r.errorCode() != "bad_cursor" {
			t.Errorf("cursor %q: %d %s", bad, r.status, r.body)
		}
	}
}

func without(all, drop []string) []string {
	var out []string
	for _, s := range all {
		keep := true
		for _, d := range drop {
			keep = keep && s != d
		}
		if keep {
			out = append(out, s)
		}
	}
	return out
}

// walkRuns follows next_cursor from the first page of GET /v1/runs?query.
func (e *testEnv) walkRuns(t *testing.T, query string) []string {
	t.Helper()
	var out []string
	cursor := ""
	for page := 0; ; page++ {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := e.do(t, http.MethodGet, "/v1/runs?"+q, "", "")
		var body RunList
		if r.status != http.StatusOK || json.Unmarshal(r.body, &body) != nil {
			t.Fatalf("%s: %d %s", q, r.status, r.body)
		}
		for _, s := range body.Runs {
			out = append(out, s.SessionID)
		}
		if body.NextCursor == "" {
			return out
		}
		if page > 100 {
			t.Fatal("the listing does not end")
		}
		cursor = body.NextCursor
	}
}

// listAll is GET /v1/runs as it was before the store's index: every
// session read and sorted for every page. BenchmarkListScaling measures
// it as the baseline.
func (a *API) listAll(c *gin.Context, p access.Principal, f ListFilter, after store.Cursor) (RunList, error) {
	ctx := c.Request.Context()
	infos, err := a.o.Store.Sessions(ctx)
	if err != nil {
		return RunList{}, err
	}
	sort.Slice(infos, func(i, j int) bool {
		if infos[i].LastTS != infos[j].LastTS {
			return infos[i].LastTS > infos[j].LastTS
		}
		return infos[i].SessionID > infos[j].SessionID
	})
	out := RunList{Runs: []RunSummary{}}
	for _, in := range infos {
		if !after.Precedes(store.CursorOf(in)) {
			continue
		}
		s, err := a.summary(c, in)
		if err != nil {
			return RunList{}, err
		}
		if !a.o.Access.Allowed(ctx, p, s.Repository, access.Read) {
			continue
		}
		if len(out.Runs) == f.Limit {
			out.NextCursor = store.CursorOf(in).Encode()
			break
		}
		out.Runs = append(out.Runs, s)
	}
	return out, nil
}

// BenchmarkListScaling: the latency of one page of GET /v1/runs (50
// sessions, the operator's view) at 100 and at 10,000 stored sessions in
// the embedded SQLite store, for the first page and a deep one (from the
// middle of the listing), through the index (index) and the old way
// (all: every session read and sorted per page). It reports each latency
// and the 10,000/100 ratio of each: 1 means the page does not get slower
// with the number of sessions.
func BenchmarkListScaling(b *testing.B) {
	type key struct{ path, page string }
	lat := map[int]map[key]float64{}
	for _, n := range []int{100, 10000} {
		st, err := sqlite.Open(b.TempDir(), newSealer(b), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		seed(b, st, n)
		env := newTestEnv(b, Options{Store: st})
		c, _ := gin.CreateTestContext(httptest.NewRecorder())
		c.Request = httptest.NewRequest(http.MethodGet, "/v1/runs", nil)
		c.Request.Header.Set("Authorization", env.readAuth)
		p, ok := env.api.identify(c)
		if !ok {
			b.Fatal("identify")
		}
		infos, err := st.Sessions(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		store.SortForList(infos)
		deep := store.CursorOf(infos[n/2])
		f := ListFilter{Limit: 50}
		run := map[key]func() (RunList, error){
			{"index", "first"}: func() (RunList, error) { return env.api.List(c, p, f) },
			{"index", "deep"}: func() (RunList, error) {
				g := f
				g.Cursor = deep.Encode()
				return env.api.List(c, p, g)
			},
			{"all", "first"}: func() (RunList, error) { return env.api.listAll(c, p, f, store.Cursor{}) },
			{"all", "deep"}:  func() (RunList, error) { return env.api.listAll(c, p, f, deep) },
		}
		lat[n] = map[key]float64{}
		for k, fn := range run {
			first, err := fn() // warms the summary cache, as on a running server
			if err != nil || len(first.Runs) != min(50, n-n/2-1) && k.page == "deep" || len(first.Runs) != 50 && k.page == "first" {
				b.Fatalf("%v at %d: %d runs, %v", k, n, len(first.Runs), err)
			}
			iters := max(b.N, 5)
			start := time.Now()
			for i := 0; i < iters; i++ {
				if _, err := fn(); err != nil {
					b.Fatal(err)
				}
			}
			lat[n][k] = float64(time.Since(start).Microseconds()) / float64(iters) / 1000
		}
		st.Close()
	}
	for _, path := range []string{"index", "all"} {
		for _, page := range []string{"first", "deep"} {
			k := key{path, page}
			b.ReportMetric(lat[100][k], fmt.Sprintf("ms/%s-%s@100", path, page))
			b.ReportMetric(lat[10000][k], fmt.Sprintf("ms/%s-%s@10k", path, page))
			b.ReportMetric(lat[10000][k]/lat[100][k], fmt.Sprintf("x/%s-%s-10k/100", path, page))
		}
	}
}

// seed appends n finished sessions from 32 writers (group commit).
func seed(b *testing.B, st store.Store, n int) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				sid := fmt.Sprintf("s%05d", i)
				run := "r" + sid
				drafts := append(startDrafts(run, "prompt "+sid), endDrafts(run)...)
				if _, err := st.Append(context.Background(), sid, 0, drafts...); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
