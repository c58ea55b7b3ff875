// Package auth decides who may drive the bot on a repository: trigger a
// run, approve or deny a pending action, or cancel a run.
//
// The rules, in the order they are applied:
//
//  1. The bot itself is never authorized (it must not approve its own
//     actions, nor react to its own comments).
//  2. An account of type "Bot" (the webhook sender's type, never a login
//     suffix such as "[bot]") is considered only if its login is in the
//     explicit bot allow-list; every other bot is refused.
//  3. If the user allow-list is set, a user's login must be in it. The list
//     narrows, it never widens: a listed user still needs rule 4. (Bots are
//     governed by the bot allow-list of rule 2 instead.)
//  4. The collaborator permission API must report write, maintain or admin
//     on the repository. author_association is never consulted.
//
// Logins compare case-insensitively, as GitHub's do; there is no pattern
// or suffix matching. Permission answers are cached per repository and
// login for a short TTL. Any error from GitHub is a refusal (fail closed).
package auth

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// PermissionSource reports a user's permission on a repository (admin,
// maintain, write, triage, read or none). *github.Client satisfies it.
type PermissionSource interface {
	PermissionLevel(ctx context.Context, owner, repo, login string) (string, error)
}

// Action is what the user asks the bot to do.
type Action string

// Actions that need authorization.
const (
	ActionRun     Action = "run"
	ActionApprove Action = "approve"
	ActionDeny    Action = "deny"
	ActionCancel  Action = "cancel"
	ActionStatus  Action = "status"
)

// Reason says why a request was allowed or refused.
type Reason string

// Reasons.
const (
	ReasonAllowed        Reason = "allowed"
	ReasonSelf           Reason = "self"              // the bot's own account
	ReasonBot            Reason = "bot_not_allowed"   // a bot not in the bot allow-list
	ReasonAccountType    Reason = "account_type"      // neither User nor Bot
	ReasonNotListed      Reason = "not_in_allow_list" // the user allow-list is set and lacks the login
	ReasonPermission     Reason = "insufficient_permission"
	ReasonLookupFailed   Reason = "permission_check_failed" // GitHub error: fail closed
	ReasonInvalidRequest Reason = "invalid_request"
)

// Policy configures an Authorizer.
type Policy struct {
	// AllowedUsers, when non-empty, is the only set of users who may drive
	// the bot; they still need write access.
	AllowedUsers []string
	// AllowedBots lists the bot accounts (exact logins, e.g.
	// "renovate[bot]") that may drive the bot; they still need write access.
	AllowedBots []string
	// BotLogin is the bot's own login; it is never authorized.
	BotLogin string
	// TTL is how long a permission answer is reused. Default one minute;
	// negative disables the cache.
	TTL time.Duration
	// Now is the cache's clock. Default time.Now.
	Now func() time.Time
	// Shared, when set, replaces the process's own cache with one that
	// replicas sharing a store read and write together (the PostgreSQL
	// store's cache table): a permission asked by one replica is reused by
	// the others for TTL, and Forget drops it on all of them. Its errors
	// are not refusals: GitHub is asked instead.
	Shared SharedCache
}

// SharedCache is a key/value cache with expiry shared by replicas
// (runtime/store/postgres.Cache satisfies it).
type SharedCache interface {
	Get(ctx context.Context, key string) (string, bool, error)
	Put(ctx context.Context, key, value string, ttl time.Duration) error
	Delete(ctx context.Context, key string) error
}

// Request is one authorization question.
type Request struct {
	Owner, Repo string
	Login       string
	// UserType is the account type from the webhook's sender ("User",
	// "Bot"); "" when unknown, which is treated as a user.
	UserType string
	Action   Action
}

// Decision is the answer to a Request.
type Decision struct {
	Allowed bool
	Reason  Reason
	// Permission is the level GitHub reported, if it was asked.
	Permission string
	// Detail is for logs: the error from GitHub, for example. It is not
	// shown to the user.
	Detail  string
	Request Request
}

// Authorizer applies a Policy. It is safe for concurrent use.
type Authorizer struct {
	src    PermissionSource
	users  map[string]bool
	bots   map[string]bool
	self   string
	ttl    time.Duration
	now    func() time.Time
	shared SharedCache

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	level string
	at    time.Time
}

// New returns an Authorizer asking src for permissions.
func New(src PermissionSource, p Policy) *Authorizer {
	a := &Authorizer{src: src, users: set(p.AllowedUsers), bots: set(p.AllowedBots), self: strings.ToLower(p.BotLogin), ttl: p.TTL, now: p.Now, shared: p.Shared, cache: map[string]cached{}}
	if a.ttl == 0 {
		a.ttl = time.Minute
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

func set(logins []string) map[string]bool {
	m := map[string]bool{}
	for _, l := range logins {
		if l = strings.TrimSpace(l); l != "" {
			m[strings.ToLower(l)] = true
		}
	}
	return m
}

// Authorize decides r. It never returns an error: a failure to decide is a
// refusal with ReasonLookupFailed.
func (a *Authorizer) Authorize(ctx context.Context, r Request) Decision {
	d := Decision{Request: r}
	login := strings.ToLower(strings.TrimSpace(r.Login))
	switch {
	case login == "" || r.Owner == "" || r.Repo == "":
		d.Reason, d.Detail = ReasonInvalidRequest, "owner, repo and login are required"
		return d
	case a.self != "" && login == a.self:
		d.Reason = ReasonSelf
		return d
	}
	switch r.UserType {
	case "", "User":
	case "Bot":
		if !a.bots[login] {
			d.Reason = ReasonBot
			return d
		}
	default:
		d.Reason, d.Detail = ReasonAccountType, "account type "+r.UserType
		return d
	}
	if len(a.users) > 0 && r.UserType != "Bot" && !a.users[login] {
		d.Reason = ReasonNotListed
		return d
	}
	level, err := a.permission(ctx, r.Owner, r.Repo, r.Login)
	if err != nil {
		d.Reason, d.Detail = ReasonLookupFailed, err.Error()
		return d
	}
	d.Permission = level
	switch level {
	case "admin", "maintain", "write":
		d.Allowed, d.Reason = true, ReasonAllowed
	default:
		d.Reason = ReasonPermission
	}
	return d
}

// cacheKey names login's permission on owner/repo in the caches.
func cacheKey(owner, repo, login string) string {
	return strings.ToLower(owner + "/" + repo + "\x00" + login)
}

// sharedKey is cacheKey in the shared cache (text: no NUL), whose other
// users are not permissions. Logins hold no ':'.
func sharedKey(k string) string { return "github.permission:" + strings.Replace(k, "\x00", ":", 1) }

func (a *Authorizer) permission(ctx context.Context, owner, repo, login string) (string, error) {
	k := cacheKey(owner, repo, login)
	now := a.now()
	if a.ttl > 0 {
		if a.shared != nil {
			if level, ok, err := a.shared.Get(ctx, sharedKey(k)); err == nil && ok {
				return level, nil
			}
		} else {
			a.mu.Lock()
			c, ok := a.cache[k]
			a.mu.Unlock()
			if ok && now.Sub(c.at) < a.ttl && !now.Before(c.at) {
				return c.level, nil
			}
		}
	}
	level, err := a.src.PermissionLevel(ctx, owner, repo, login)
	if err != nil {
		return "", fmt.Errorf("permission of %s on %s/%s: %w", login, owner, repo, err)
	}
	if a.ttl > 0 {
		if a.shared != nil {
			// Not stored: the next check asks GitHub again, which is
			// what no cache would do.
			_ = a.shared.Put(ctx, sharedKey(k), level, a.ttl)
		} else {
			a.mu.Lock()
			a.cache[k] = cached{level: level, at: now}
			a.mu.Unlock()
		}
	}
	return level, nil
}

// Forget drops cached permissions of login on owner/repo, e.g. after a
// "member" or "repository" webhook says access changed; with a shared
// cache, on every replica.
func (a *Authorizer) Forget(owner, repo, login string) {
	k := cacheKey(owner, repo, login)
	a.mu.Lock()
	delete(a.cache, k)
	a.mu.Unlock()
	if a.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.shared.Delete(ctx, sharedKey(k))
	}
}

// RefusalMessage is the comment the bot posts when d refuses: one polite
// paragraph saying why and what to do. It returns "" for an allowed
// decision and for the bot's own account (the bot does not answer itself).
func RefusalMessage(d Decision) string {
	if d.Allowed || d.Reason == ReasonSelf {
		return ""
	}
	r := d.Request
	who := "@" + r.Login
	if r.Login == "" {
		who = "Hi"
	}
	repo := r.Owner + "/" + r.Repo
	verb := actionText(r.Action)
	switch d.Reason {
	case ReasonBot:
		return fmt.Sprintf("%s: I ignore commands from bot accounts unless the bot is listed in `allowed_bots`. If %s should be able to %s, ask the operator of this bot to add it.", who, r.Login, verb)
	case ReasonAccountType:
		return fmt.Sprintf("%s: I only take commands from user accounts, so I did not %s.", who, verb)
	case ReasonNotListed:
		return fmt.Sprintf("%s, thanks for the request. This bot only takes commands from the users in its `allowed_users` list, so I did not %s. Ask the operator of this bot to add you, or ask a listed maintainer to run the command.", who, verb)
	case ReasonPermission:
		have := d.Permission
		if have == "" {
			have = "none"
		}
		return fmt.Sprintf("%s, thanks for the request. Only people with write access to %s can ask me to %s, and your permission is `%s`. Ask a maintainer to run the command, or to grant you write access.", who, repo, verb, have)
	case ReasonLookupFailed:
		return fmt.Sprintf("%s: I could not check your permission on %s with GitHub just now, so I did not %s. Please try again in a few minutes.", who, repo, verb)
	default:
		return fmt.Sprintf("%s: I could not tell who sent this command, so I did not %s.", who, verb)
	}
}

func actionText(a Action) string {
	switch a {
	case ActionRun:
		return "start a run"
	case ActionApprove:
		return "approve a pending action"
	case ActionDeny:
		return "deny a pending action"
	case ActionCancel:
		return "cancel the run"
	case ActionStatus:
		return "show the run's status"
	}
	return "act on this command"
}
