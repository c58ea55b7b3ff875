package action

import (
	"context"
	"fmt"
	"strings"
)

// Who may start a run without a command. Every trigger of the Action is
// held to the same rule as an `/agent` command: the account that caused
// the event needs write, maintain or admin on the repository (the
// collaborator permission API, never author_association or a "[bot]"
// suffix). Two inputs widen it, for the cycles that only read and
// comment (review, triage): allowed_non_write_users (logins, or *) and
// allowed_bots (bot logins, or *). A fix run changes code, so it always
// needs write access (the dispatcher checks it again). Events that would
// put a pull request's code next to the base repository's token are
// refused: pull_request_target unless allow_pull_request_target opts in,
// and pull requests from forks. With the opt-in, a fork's pull request on
// pull_request_target gets the review cycle only, its head untrusted as
// the bot treats every fork's code (fetched from the base repository,
// built-in workflows only, the repository's hooks and MCP servers off,
// read-only review tools, no fix proposal); the author's permission is
// checked as on any trigger. docs/action-security.md explains each rule.

// PermissionSource reports a user's permission on a repository (admin,
// maintain, write, triage, read or none). *github.Client satisfies it.
type PermissionSource interface {
	PermissionLevel(ctx context.Context, owner, repo, login string) (string, error)
}

// Trust is the outcome of the check: Refused says why the run does not
// start ("" when it may), Note what allowed it when a list did.
type Trust struct {
	Refused string
	Note    string
	// UntrustedHead is set for a fork's pull request on an opted-in
	// pull_request_target: the review must not propose fixes (a fix run
	// on a fork's code is refused anyway) and reads the head as data.
	UntrustedHead bool
}

// CheckTrust decides whether auto may run for the event's actor. An error
// (GitHub could not say the actor's permission) means it may not: the
// caller fails the step.
func CheckTrust(ctx context.Context, perms PermissionSource, eventName string, auto Automation, in Inputs) (Trust, error) {
	t := auto.Trigger
	target := eventName == "pull_request_target"
	if target && !in.AllowPullRequestTarget {
		return Trust{Refused: "pull_request_target runs with the base repository's secrets and a write token while the pull request's code is untrusted; agentos does not run on it unless allow_pull_request_target is true (use pull_request, see docs/action-security.md)"}, nil
	}
	var tr Trust
	// A pull request whose payload names its head (pull_request,
	// pull_request_target, reviews) is a fork's when the head is another
	// repository or one that was deleted (no head repository).
	if t.IsPR && t.HeadSHA != "" && !strings.EqualFold(t.HeadRepo, t.Repo) {
		from := t.HeadRepo
		if from == "" {
			from = "a deleted fork"
		}
		if !target {
			return Trust{Refused: fmt.Sprintf("pull request #%d comes from the fork %s; agentos does not review or run forks' pull requests automatically (a maintainer can ask with a comment, or opt in to pull_request_target; see docs/action-security.md)", t.Number, from)}, nil
		}
		if auto.Cycle != CycleReview {
			return Trust{Refused: fmt.Sprintf("pull request #%d comes from the fork %s; on pull_request_target only the review cycle runs on a fork's pull request (its code is untrusted), not a %s run", t.Number, from, auto.Cycle)}, nil
		}
		tr = Trust{UntrustedHead: true, Note: fmt.Sprintf("pull request #%d comes from the fork %s: reviewed as untrusted code (built-in workflows, read-only tools, no fix proposal)", t.Number, from)}
	}
	login := t.Author
	if login == "" {
		// A misconfigured run (no GITHUB_ACTOR, no sender): nobody's
		// permission can be checked, so the step fails.
		return Trust{}, fmt.Errorf("the %s event names no actor (no sender, GITHUB_ACTOR empty): whose permission would start the run is unknown", eventName)
	}
	readOnly := auto.Cycle == CycleReview || auto.Cycle == CycleTriage
	if strings.EqualFold(t.AuthorType, "Bot") {
		if !listed(in.AllowedBots, login) {
			return Trust{Refused: fmt.Sprintf("%s is a bot, and allowed_bots does not list it", login)}, nil
		}
		if readOnly {
			return tr.with(fmt.Sprintf("%s is allowed by allowed_bots", login)), nil
		}
	}
	level, err := perms.PermissionLevel(ctx, t.Owner, t.Name, login)
	if err != nil {
		return Trust{}, fmt.Errorf("checking %s's permission on %s: %w", login, t.Repo, err)
	}
	switch level {
	case "admin", "maintain", "write":
		if len(in.AllowedUsers) > 0 && !listed(in.AllowedUsers, login) && !strings.EqualFold(t.AuthorType, "Bot") {
			return Trust{Refused: fmt.Sprintf("%s is not in allowed_users", login)}, nil
		}
		return tr, nil
	}
	if readOnly && listed(in.AllowedNonWriteUsers, login) {
		return tr.with(fmt.Sprintf("%s has %s access and is allowed by allowed_non_write_users", login, orDefault(level, "no"))), nil
	}
	what := "a fix run needs"
	if readOnly {
		what = "the " + auto.Cycle + " cycle needs (or allowed_non_write_users listing them)"
	}
	return Trust{Refused: fmt.Sprintf("%s has %s access to %s; %s write access", login, orDefault(level, "no"), t.Repo, what)}, nil
}

// with adds a note to the trust's.
func (tr Trust) with(note string) Trust {
	if tr.Note != "" {
		note = tr.Note + "; " + note
	}
	tr.Note = note
	return tr
}

// listed reports whether login is in list, or list has "*". Logins
// compare as GitHub's do, without case.
func listed(list []string, login string) bool {
	for _, l := range list {
		if l == "*" || strings.EqualFold(l, login) {
			return true
		}
	}
	return false
}
