package webhook

import "testing"

// testEvents stand in for the route table's (dispatch.Events, which this
// package cannot import): the events and actions the bot acts on.
var testEvents = Events{
	"issue_comment":               {"created"},
	"pull_request_review":         {"submitted"},
	"pull_request_review_comment": {"created"},
	"pull_request":                {"closed", "synchronize"},
	"installation":                nil,
	"installation_repositories":   nil,
}

func TestEvents(t *testing.T) {
	for _, c := range []struct {
		event, action string
		has, accepts  bool
	}{
		{"issue_comment", "created", true, true},
		{"issue_comment", "edited", true, false},
		{"installation", "deleted", true, true},
		{"push", "", false, false},
	} {
		if testEvents.Has(c.event) != c.has || testEvents.Accepts(c.event, c.action) != c.accepts {
			t.Errorf("%s.%s: has %v accepts %v", c.event, c.action, testEvents.Has(c.event), testEvents.Accepts(c.event, c.action))
		}
	}
	if testEvents.Label("ping") != "ping" || testEvents.Label("push") != "other" || Events(nil).Has("issue_comment") {
		t.Error("labels")
	}
}
