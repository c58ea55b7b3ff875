package webhook

import (
	"reflect"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/queue"
	"github.com/google/go-github/v62/github"
)

const (
	sha    = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	repo   = "Codertocat/Hello-World"
	prNode = "MDExOlB1bGxSZXF1ZXN0Mjc5MTQ3NDM3"
	prURL  = "https://github.com/Codertocat/Hello-World/pull/2"
)

func TestNormalize(t *testing.T) {
	cases := []struct {
		name   string
		event  string
		action string
		n      int // which example of event.action
		change func(m map[string]any)
		want   Trigger
		ok     bool
	}{
		{"issue comment", "issue_comment", "created", 3, nil, Trigger{
			Kind: KindComment, Event: "issue_comment", Action: "created", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 1, CommentID: 492700400, Author: "Codertocat", AuthorType: "User", AuthorAssociation: "OWNER",
			Body: "You are totally right! I'll get this fixed right away.", IssueState: "open"}, true},
		{"comment on a pull request", "issue_comment", "created", 3, func(m map[string]any) {
			obj(m, "issue")["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/1"}
			obj(m, "comment")["body"] = "/agent fix auth.ts"
			obj(m, "comment")["author_association"] = "CONTRIBUTOR"
		}, Trigger{
			Kind: KindComment, Event: "issue_comment", Action: "created", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 1, IsPR: true, CommentID: 492700400, Author: "Codertocat", AuthorType: "User", AuthorAssociation: "CONTRIBUTOR",
			Body: "/agent fix auth.ts", IssueState: "open"}, true},
		{"comment by a bot", "issue_comment", "created", 3, func(m map[string]any) {
			u := obj(obj(m, "comment"), "user")
			u["login"], u["type"] = "agentos[bot]", "Bot"
		}, Trigger{
			Kind: KindComment, Event: "issue_comment", Action: "created", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 1, CommentID: 492700400, Author: "agentos[bot]", AuthorType: "Bot", AuthorAssociation: "OWNER",
			Body: "You are totally right! I'll get this fixed right away.", IssueState: "open"}, true},
		{"comment edited is ignored", "issue_comment", "edited", 0, nil, Trigger{Event: "issue_comment", Action: "edited"}, false},
		{"comment deleted is ignored", "issue_comment", "deleted", 0, nil, Trigger{Event: "issue_comment", Action: "deleted"}, false},
		{"review submitted", "pull_request_review", "submitted", 1, nil, Trigger{
			Kind: KindReview, Event: "pull_request_review", Action: "submitted", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 2, IsPR: true, ReviewID: 237895671, ReviewState: "commented", Author: "Codertocat", AuthorType: "User", AuthorAssociation: "OWNER",
			HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: prNode, PRURL: prURL, HeadRepo: repo, BaseRepo: repo, IssueState: "open"}, true},
		{"review approved from a fork", "pull_request_review", "submitted", 1, func(m map[string]any) {
			r := obj(m, "review")
			r["state"], r["body"] = "APPROVED", "/agent approve ap-1"
			obj(obj(obj(m, "pull_request"), "head"), "repo")["full_name"] = "mallory/Hello-World"
		}, Trigger{
			Kind: KindReview, Event: "pull_request_review", Action: "submitted", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 2, IsPR: true, ReviewID: 237895671, ReviewState: "approved", Author: "Codertocat", AuthorType: "User", AuthorAssociation: "OWNER",
			Body: "/agent approve ap-1", HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: prNode, PRURL: prURL, HeadRepo: "mallory/Hello-World", BaseRepo: repo, IssueState: "open"}, true},
		{"review dismissed", "pull_request_review", "dismissed", 0, func(m map[string]any) {
			s := obj(m, "sender")
			s["login"] = "maintainer"
		}, Trigger{
			Kind: KindReview, Event: "pull_request_review", Action: "dismissed", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 2, IsPR: true, ReviewID: 237895671, ReviewState: "dismissed", Author: "maintainer", AuthorType: "User",
			HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: "MDExOlB1bGxSZXF1ZXN0MzcwMTIzNjQw", PRURL: "https://github.com/hellomouse/GNS/pull/902", HeadRepo: repo, BaseRepo: repo, IssueState: "open"}, true},
		{"review comment", "pull_request_review_comment", "created", 1, func(m map[string]any) {
			obj(m, "comment")["in_reply_to_id"] = 284312000
		}, Trigger{
			Kind: KindReviewComment, Event: "pull_request_review_comment", Action: "created", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 2, IsPR: true, CommentID: 284312630, InReplyTo: 284312000, ReviewID: 237895671, Author: "Codertocat", AuthorType: "User", AuthorAssociation: "OWNER",
			Body: "Maybe you should use more emoji on this line.", HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: prNode, PRURL: prURL, HeadRepo: repo, BaseRepo: repo, IssueState: "open"}, true},
		{"review comment edited is ignored", "pull_request_review_comment", "edited", 0, nil, Trigger{Event: "pull_request_review_comment", Action: "edited"}, false},
		{"pull request closed", "pull_request", "closed", 0, nil, Trigger{
			Kind: KindPRClosed, Event: "pull_request", Action: "closed", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 2, IsPR: true, Author: "Codertocat", AuthorType: "User", HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: prNode, PRURL: prURL, HeadRepo: repo, BaseRepo: repo, IssueState: "closed"}, true},
		{"pull request merged from deleted fork", "pull_request", "closed", 0, func(m map[string]any) {
			pr := obj(m, "pull_request")
			pr["merged"] = true
			obj(pr, "head")["repo"] = nil
		}, Trigger{
			Kind: KindPRClosed, Event: "pull_request", Action: "closed", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 2, IsPR: true, Author: "Codertocat", AuthorType: "User", HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: prNode, PRURL: prURL, BaseRepo: repo, IssueState: "closed", Merged: true}, true},
		{"pull request synchronize", "pull_request", "synchronize", 0, nil, Trigger{
			Kind: KindPRSynchronize, Event: "pull_request", Action: "synchronize", Repo: repo, Owner: "Codertocat", Name: "Hello-World", InstallationID: 1, DefaultBranch: "master",
			Number: 2, IsPR: true, Author: "Codertocat", AuthorType: "User", HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: prNode, PRURL: prURL, HeadRepo: repo, BaseRepo: repo, IssueState: "open"}, true},
		{"pull request opened is ignored", "pull_request", "opened", 0, nil, Trigger{Event: "pull_request", Action: "opened"}, false},
		{"installation created", "installation", "created", 0, nil, Trigger{
			Kind: KindInstallation, Event: "installation", Action: "created", Owner: "Codertocat", InstallationID: 957387,
			Author: "Codertocat", AuthorType: "User", Repositories: []string{repo}}, true},
		{"installation suspended", "installation", "suspend", 0, nil, Trigger{
			Kind: KindInstallation, Event: "installation", Action: "suspend", Owner: "Codertocat", InstallationID: 16598467,
			Author: "Codertocat", AuthorType: "User"}, true},
		{"installation repositories added", "installation_repositories", "added", 0, nil, Trigger{
			Kind: KindInstallation, Event: "installation_repositories", Action: "added", Owner: "Codertocat", InstallationID: 957387,
			Author: "Codertocat", AuthorType: "User", Repositories: []string{"Codertocat/Space"}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := mutate(t, exampleOf(t, tc.event, tc.action, tc.n), tc.change)
			ev, err := github.ParseWebHook(tc.event, body)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.DeliveryID = "d1"
			// An ignored case is one the Processor does not act on: an
			// action no route takes (Events) or one normalize has no
			// trigger for; the others are normalize's translation.
			got, ok, err := normalize(queue.Delivery{ID: "d1", Event: tc.event, Action: tc.action, Body: body}, ev)
			if strings.HasSuffix(tc.name, "is ignored") {
				ok = ok && testEvents.Accepts(tc.event, tc.action)
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("normalize: ok %v err %v, want ok %v", ok, err, tc.ok)
			}
			if tc.ok && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestNormalizeIncomplete(t *testing.T) {
	cases := []struct {
		event string
		body  string
	}{
		{"issue_comment", `{"action":"created","repository":{"full_name":"a/b"}}`},
		{"issue_comment", `{"action":"created","issue":{"number":1},"comment":{"id":2}}`},
		{"pull_request_review", `{"action":"submitted","review":{"id":1}}`},
		{"pull_request_review_comment", `{"action":"created","comment":{"id":1}}`},
		{"pull_request", `{"action":"closed","repository":{"full_name":"a/b"}}`},
	}
	for _, tc := range cases {
		ev, err := github.ParseWebHook(tc.event, []byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, err := normalize(queue.Delivery{Event: tc.event}, ev); err == nil || ok {
			t.Errorf("%s %s: ok %v err %v, want an error", tc.event, tc.body, ok, err)
		}
	}
}

func TestIsFork(t *testing.T) {
	cases := []struct {
		t    Trigger
		want bool
	}{
		{Trigger{IsPR: true, HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: prNode, PRURL: prURL, HeadRepo: repo, BaseRepo: repo}, false},
		{Trigger{IsPR: true, HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: prNode, PRURL: prURL, HeadRepo: "mallory/x", BaseRepo: repo}, true},
		{Trigger{IsPR: true, HeadSHA: sha, HeadRef: "changes", BaseRef: "master", PRNodeID: prNode, PRURL: prURL, BaseRepo: repo}, true}, // fork deleted
		{Trigger{IsPR: true, BaseRepo: repo}, false}, // issue_comment on a PR: unknown here
		{Trigger{}, false},
	}
	for _, tc := range cases {
		if got := tc.t.IsFork(); got != tc.want {
			t.Errorf("%+v.IsFork() = %v, want %v", tc.t, got, tc.want)
		}
	}
}

func TestNormalizeExported(t *testing.T) {
	body := []byte(`{"action":"created","issue":{"number":7,"state":"open"},"comment":{"id":9,"body":"/agent fix it","user":{"login":"alice","type":"User"},"author_association":"MEMBER"},"repository":{"full_name":"octo/app","name":"app","owner":{"login":"octo"}},"sender":{"login":"alice","type":"User"}}`)
	tr, ok, err := Normalize("issue_comment", "d-1", body)
	if err != nil || !ok {
		t.Fatalf("Normalize = %v, %v", ok, err)
	}
	if tr.Kind != KindComment || tr.Number != 7 || tr.Author != "alice" || tr.Body != "/agent fix it" || tr.Repo != "octo/app" || tr.DeliveryID != "d-1" {
		t.Errorf("trigger = %+v", tr)
	}
	if _, ok, err := Normalize("workflow_dispatch", "d-2", []byte(`{}`)); ok || err != nil {
		t.Errorf("unhandled event: ok=%v err=%v", ok, err)
	}
	if _, _, err := Normalize("issue_comment", "d-3", []byte(`{not json`)); err == nil {
		t.Error("malformed body accepted")
	}
}
