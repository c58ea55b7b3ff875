package fakegithub

import (
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"
)

// TestAppHookDeliveriesPages: the delivery log lists attempts newest
// first, a page at a time with the next page's cursor in the Link header,
// filters by status, and answers only the app's JWT.
func TestAppHookDeliveriesPages(t *testing.T) {
	f, url, sign := appWorld(t)
	for i := range 5 {
		status := 202
		if i%2 == 1 {
			status = 503
		}
		f.recordAttempt(Delivery{ID: "guid-" + string(rune('a'+i)), Event: "issue_comment", Body: []byte(`{"action":"created","installation":{"id":9001},"repository":{"id":1}}`)}, false, time.Now(), status, nil)
	}
	get := func(u, auth string) (*http.Response, []hookDeliveryItem) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var items []hookDeliveryItem
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&items); err != nil {
				t.Fatal(err)
			}
		}
		return resp, items
	}
	var guids []string
	next := url + "/app/hook/deliveries?per_page=2"
	link := regexp.MustCompile(`<([^>]+)>; rel="next"`)
	for pages := 0; next != ""; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages of 2 for 5 attempts")
		}
		resp, items := get(next, "Bearer "+sign())
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", next, resp.Status)
		}
		for _, it := range items {
			guids = append(guids, it.GUID)
		}
		next = ""
		if m := link.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
			next = m[1]
		}
	}
	if got, want := len(guids), 5; got != want || guids[0] != "guid-e" || guids[4] != "guid-a" {
		t.Fatalf("pages gave %v, want guid-e … guid-a, newest first", guids)
	}
	if _, items := get(url+"/app/hook/deliveries?status=failure", "Bearer "+sign()); len(items) != 2 || items[0].StatusCode != 503 {
		t.Fatalf("status=failure gave %+v, want the two 503s", items)
	}
	if resp, _ := get(url+"/app/hook/deliveries", "token "+devTok); resp.StatusCode/100 != 4 {
		t.Fatalf("a user token on the delivery log: %s, want 4xx", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/app/hook/deliveries/999/attempts", nil)
	req.Header.Set("Authorization", "Bearer "+sign())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("redeliver an unknown attempt: %s, want 404", resp.Status)
	}
	f.CheckNoViolations(t)
}
