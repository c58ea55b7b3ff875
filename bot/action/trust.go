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
// run a pull request's code with the base repository's token are refused
// outright: pull_request_target, and pull requests from forks.
// docs/action-security.md explains each rule.

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
}

// CheckTrust decides whether auto may run for the event's actor. An error
// (GitHub could not say the actor's permission) means it may not: the
// caller fails the step.
func CheckTrust(ctx context.Context, perms PermissionSource, eventName string, auto Automation, in Inputs) (Trust, error) {
	t := auto.Trigger
	if eventName == "pull_request_target" {
		return Trust{Refused: "pull_request_target runs with the base repository's secrets and a write token while the pull request's code is untrusted; agentos does not run on it (use pull_request, see docs/action-security.md)"}, nil
	}
	if t.IsPR && t.HeadRepo != "" && !strings.EqualFold(t.HeadRepo, t.Repo) {
		return Trust{Refused: fmt.Sprintf("pull request #%d comes from the fork %s; agentos does not review or run forks' pull requests automatically (a maintainer can ask with a comment; see docs/action-security.md)", t.Number, t.HeadRepo)}, nil
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
			return Trust{Note: fmt.Sprintf("%s is allowed by allowed_bots", login)}, nil
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
		return Trust{}, nil
	}
	if readOnly && listed(in.AllowedNonWriteUsers, login) {
		return Trust{Note: fmt.Sprintf("%s has %s access and is allowed by allowed_non_write_users", login, orDefault(level, "no"))}, nil
	}
	what := "a fix run needs"
	if readOnly {
		what = "the " + auto.Cycle + " cycle needs (or allowed_non_write_users listing them)"
	}
	return Trust{Refused: fmt.Sprintf("%s has %s access to %s; %s write access", login, orDefault(level, "no"), t.Repo, what)}, nil
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
