package corpus

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
)

// Example is one payload of @octokit/webhooks-examples: a real delivery
// body of an event, with its action.
type Example struct {
	Event  string
	Action string
	Body   []byte
}

type indexEntry struct {
	Name     string            `json:"name"`
	Examples []json.RawMessage `json:"examples"`
}

var (
	indexMu    sync.Mutex
	indexCache []indexEntry
)

// index reads the examples index once per process.
func index(tb TB) []indexEntry {
	tb.Helper()
	path := WebhookExamples(tb)
	indexMu.Lock()
	defer indexMu.Unlock()
	if indexCache != nil {
		return indexCache
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var idx []indexEntry
	if err := json.Unmarshal(raw, &idx); err != nil {
		tb.Fatal("webhooks-examples index: ", err)
	}
	indexCache = idx
	return indexCache
}

// Examples returns the examples of the given events (all if none); no
// example of them ends the test.
func Examples(tb TB, events ...string) []Example {
	tb.Helper()
	want := map[string]bool{}
	for _, e := range events {
		want[e] = true
	}
	var out []Example
	for _, ev := range index(tb) {
		if len(want) > 0 && !want[ev.Name] {
			continue
		}
		for _, b := range ev.Examples {
			var head struct {
				Action string `json:"action"`
			}
			if err := json.Unmarshal(b, &head); err != nil {
				tb.Fatal(fmt.Sprintf("%s example: %v", ev.Name, err))
			}
			out = append(out, Example{Event: ev.Name, Action: head.Action, Body: []byte(b)})
		}
	}
	if len(out) == 0 {
		tb.Fatal(fmt.Sprintf("no examples of %v in the corpus", events))
	}
	return out
}

// ExampleOf returns the n-th example of event with action.
func ExampleOf(tb TB, event, action string, n int) []byte {
	tb.Helper()
	for _, e := range Examples(tb, event) {
		if e.Action == action {
			if n == 0 {
				return e.Body
			}
			n--
		}
	}
	tb.Fatal(fmt.Sprintf("no example %d of %s.%s", n, event, action))
	return nil
}

// Mutate decodes a JSON payload (an example), lets f change it, and
// encodes it again; a nil f returns body as it is.
func Mutate(tb TB, body []byte, f func(m map[string]any)) []byte {
	tb.Helper()
	if f == nil {
		return body
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		tb.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Obj is the JSON object m[key] of a decoded payload.
func Obj(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }
