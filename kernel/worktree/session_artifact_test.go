package worktree

import (
	"context"
	"errors"
	"testing"
)

func TestSessionBranchArtifact(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			srv := newGitServer(t)
			bare := srv.bare(t, testRepo.Owner, testRepo.Name)
			base := seed(t, bare, "main", map[string]string{"a.txt": "1\n"})
			m := newManager(t, srv, b.backend)
			const id = "01HZXSESSBRANCH01"
			s, err := m.Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: id, Number: 5})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.LoadArtifact(); !errors.Is(err, ErrNotFound) {
				t.Errorf("LoadArtifact before any commit error = %v, want ErrNotFound", err)
			}
			wip := write(t, s.Dir, "wip.txt", "work in progress\n")
			events := []byte(`{"seq":1}` + "\n")
			sha, err := s.CommitArtifact(ctx, Artifact{RunID: "run-1", Events: events, Snapshot: []byte(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			if got := runGit(t, bare, "rev-parse", s.Branch); got != sha {
				t.Errorf("remote %s = %s, want %s", s.Branch, got, sha)
			}
			if got := runGit(t, bare, "rev-parse", sha+"^"); got != base {
				t.Errorf("artifact commit parent = %s, want %s", got, base)
			}
			if got := runGit(t, bare, "show", sha+":.agent/sessions/"+id+"/events.jsonl"); got+"\n" != string(events) {
				t.Errorf("events.jsonl = %q", got)
			}
			if got := runGit(t, bare, "log", "-1", "--format=%(trailers:key=Agent-Session,valueonly,separator=)|%(trailers:key=Agent-Run,valueonly,separator=)", sha); got != id+"|run-1" {
				t.Errorf("trailers = %q", got)
			}
			if _, err := runGitErr(bare, nil, "cat-file", "-e", sha+":wip.txt"); err == nil {
				t.Error("uncommitted work went into the artifact commit")
			}
			if got := runGit(t, s.Dir, "status", "--porcelain"); got != "?? wip.txt" {
				t.Errorf("worktree status after artifact commit = %q, want only wip.txt untracked", got)
			}
			work, err := s.Commit(ctx, CommitOptions{Message: "work", RunID: "run-1", Changes: []Change{wip}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Push(ctx); err != nil {
				t.Fatal(err)
			}
			if got := runGit(t, bare, "rev-parse", work+"^"); got != sha {
				t.Errorf("work commit parent = %s, want artifact %s", got, sha)
			}
			if _, err := s.CommitArtifact(ctx, Artifact{SessionID: "someone-else", Events: events}); !errors.Is(err, ErrInvalid) {
				t.Errorf("artifact for another session error = %v, want ErrInvalid", err)
			}

			// A later run elsewhere resumes the branch and reads the log.
			s2, err := newManager(t, srv, b.backend).Prepare(ctx, PrepareOptions{Repo: testRepo, SessionID: id, Number: 5})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			got, err := s2.LoadArtifact()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(events) {
				t.Errorf("LoadArtifact = %q, want %q", got, events)
			}
		})
	}
}
