package fakegithub

import (
	"fmt"
	"sort"
	"strings"
)

// Calls returns how many API requests (REST and GraphQL; git over HTTP is
// not counted) each endpoint received since the fake started or since the
// last ResetCalls, keyed "METHOD /template" ("POST /graphql" for GraphQL).
// Failed requests count: GitHub counts them against the rate limit too.
func (f *Fake) Calls() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.calls))
	for k, v := range f.calls {
		out[k] = v
	}
	return out
}

// CallsBy is Calls restricted to the requests that authenticated as actor
// (see Request.Actor), since the fake started or the last ResetCalls.
func (f *Fake) CallsBy(actor string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, r := range f.requests[f.callsFrom:] {
		if r.Actor == actor {
			out[callKey(r)]++
		}
	}
	return out
}

// actor names an authenticated identity for Request.Actor; f.mu is held.
func (f *Fake) actor(id *identity) string {
	switch {
	case id == nil:
		return ""
	case id.user != nil:
		return id.user.Login
	case id.installation != 0:
		return f.installationLogin(id.installation)
	case id.app != nil:
		return fmt.Sprintf("app:%d", id.app.ID)
	}
	return ""
}

// ResetCalls starts counting from zero.
func (f *Fake) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = map[string]int{}
	f.callsFrom = len(f.requests)
}

// Budget bounds the API calls of a scenario.
type Budget struct {
	// Total is the most calls allowed in all.
	Total int
	// PerEndpoint is the most calls allowed per endpoint ("METHOD
	// /template", as Calls keys them); an endpoint not listed allows none.
	PerEndpoint map[string]int
}

// CheckBudget fails the test (Errorf) when the calls counted so far exceed
// b (see Budget.Check), and returns the per-endpoint table.
func (f *Fake) CheckBudget(tb TB, b Budget) string {
	tb.Helper()
	return b.Check(tb, f.Calls())
}

// Check fails the test (Errorf) when calls (as Calls returns them, perhaps
// less a client's own) exceed b: in total, or on any endpoint. It logs the
// per-endpoint table either way and returns it.
func (b Budget) Check(tb TB, calls map[string]int) string {
	tb.Helper()
	table := FormatCalls(calls)
	tb.Logf("GitHub API calls:\n%s", table)
	total := 0
	for k, n := range calls {
		total += n
		if max := b.PerEndpoint[k]; n > max {
			tb.Errorf("GitHub API budget: %s called %d times, budget %d", k, n, max)
		}
	}
	if total > b.Total {
		tb.Errorf("GitHub API budget: %d calls in all, budget %d", total, b.Total)
	}
	return table
}

// FormatCalls renders calls as a table, one endpoint a line (most called
// first), and the total.
func FormatCalls(calls map[string]int) string {
	keys := make([]string, 0, len(calls))
	total := 0
	for k, n := range calls {
		keys = append(keys, k)
		total += n
	}
	sort.Slice(keys, func(i, j int) bool {
		if calls[keys[i]] != calls[keys[j]] {
			return calls[keys[i]] > calls[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%4d  %s\n", calls[k], k)
	}
	fmt.Fprintf(&b, "%4d  total\n", total)
	return b.String()
}
