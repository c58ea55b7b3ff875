package fakegithub

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// With "Allow GitHub Actions to create and approve pull requests" off,
// the workflow's GITHUB_TOKEN gets GitHub's 403 on POST /pulls; another
// app's installation token and a user's token still open pull requests.
func TestActionsMayNotCreatePullRequests(t *testing.T) {
	f := New(t)
	base := f.Serve(t)
	f.AddRepo(Repo{Owner: "octo", Name: "app"})
	f.AddApp(App{ID: 15368, Slug: "github-actions"})
	f.AddInstallation(4242, 15368, "octo/app")
	f.AddInstallationToken("ghs_workflow", 4242)
	// A repository has one installation in the fake: the other app is
	// installed on another repository with the setting off too.
	f.AddRepo(Repo{Owner: "octo", Name: "lib"})
	f.AddApp(App{ID: 77, Slug: "agentos"})
	f.AddInstallation(9001, 77, "octo/lib")
	f.AddInstallationToken("ghs_agentos", 9001)
	for i, b := range []string{"a", "b", "c"} {
		f.SetRef("octo/app", "heads/"+b, strings.Repeat(string(rune('1'+i)), 40))
		f.SetRef("octo/lib", "heads/"+b, strings.Repeat(string(rune('1'+i)), 40))
	}
	f.SetActionsCanCreatePullRequests("octo/app", false)
	f.SetActionsCanCreatePullRequests("octo/lib", false)
	open := func(token, head string) (int, string) {
		t.Helper()
		repo := "app"
		if token == "ghs_agentos" {
			repo = "lib"
		}
		body := `{"title":"t","head":"` + head + `","base":"main","draft":true}`
		req, _ := http.NewRequest(http.MethodPost, base+"/repos/octo/"+repo+"/pulls", strings.NewReader(body))
		req.Header.Set("Authorization", "token "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Message string }
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out.Message
	}
	if code, msg := open("ghs_workflow", "a"); code != http.StatusForbidden || msg != ActionsPRRefusal {
		t.Errorf("GITHUB_TOKEN with the setting off: %d %q, want 403 %q", code, msg, ActionsPRRefusal)
	}
	if n := len(f.PRs("octo/app")) + len(f.PRs("octo/lib")); n != 0 {
		t.Errorf("%d pull requests opened by a refused request", n)
	}
	if code, _ := open("ghs_agentos", "b"); code != http.StatusCreated {
		t.Errorf("another app's token: %d, want 201", code)
	}
	f.SetActionsCanCreatePullRequests("octo/app", true)
	if code, _ := open("ghs_workflow", "c"); code != http.StatusCreated {
		t.Errorf("GITHUB_TOKEN with the setting on: %d, want 201", code)
	}
	f.CheckNoViolations(t)
}

// The viewer query answers for each kind of token; other queries are
// still violations.
func TestGraphQLViewer(t *testing.T) {
	f := New(t)
	base := f.Serve(t)
	f.AddRepo(Repo{Owner: "octo", Name: "app"})
	f.AddToken("ghp_user", "alice")
	f.AddApp(App{ID: 15368, Slug: "github-actions"})
	f.AddInstallation(4242, 15368, "octo/app")
	f.AddInstallationToken("ghs_workflow", 4242)
	ask := func(token, query string) (int, string) {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"query": query})
		req, _ := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(string(b)))
		req.Header.Set("Authorization", "bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Data struct {
				Viewer struct {
					Login      string
					DatabaseID int64 `json:"databaseId"`
				}
			}
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if out.Data.Viewer.Login != "" && out.Data.Viewer.DatabaseID <= 0 {
			t.Errorf("viewer %s has no databaseId", out.Data.Viewer.Login)
		}
		return resp.StatusCode, out.Data.Viewer.Login
	}
	for tok, want := range map[string]string{"ghp_user": "alice", "ghs_workflow": "github-actions[bot]"} {
		if code, got := ask(tok, "query { viewer { login databaseId } }"); code != 200 || got != want {
			t.Errorf("%s: %d %q, want %q", tok, code, got, want)
		}
	}
	if code, _ := ask("ghp_user", "{ viewer { login email } }"); code != http.StatusNotFound {
		t.Errorf("an unsupported query: %d, want a violation (404)", code)
	}
	if n := len(f.Violations()); n != 1 {
		t.Errorf("violations %d, want 1", n)
	}
}
