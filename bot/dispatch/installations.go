package dispatch

// GitHub App installations: which installation serves a repository,
// kept in step with installation events and session links.

import (
	"github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/webhook"
)

// Installations records which GitHub App installation serves a
// repository (see Config.Installations).
type Installations interface {
	RememberInstallation(owner, repo string, id int64)
	ForgetInstallation(id int64)
}

// remember tells Installations that id serves repo.
func (d *Dispatcher) remember(repo github.Repo, id int64) {
	if d.installs != nil && id > 0 {
		d.installs.RememberInstallation(repo.Owner, repo.Name, id)
	}
}

// installationChanged keeps Installations in step with installation
// events: repositories added to an installation are served by it; a
// deleted or suspended installation, or one that lost repositories, is
// forgotten (calls on its repositories look the installation up again).
// The delivery itself is kept in the queue's store; nothing runs.
func (d *Dispatcher) installationChanged(t webhook.Trigger) Result {
	d.log().Info("installation changed", "action", t.Action, "installation", t.InstallationID, "repositories", t.Repositories, "by", t.Author)
	res := Result{Outcome: "recorded", Reason: "installation " + t.Action}
	if d.installs == nil || t.InstallationID <= 0 {
		return res
	}
	switch t.Action {
	case "deleted", "suspend", "removed":
		d.installs.ForgetInstallation(t.InstallationID)
	case "created", "added":
		for _, full := range t.Repositories {
			if r, ok := github.ParseRepo(full); ok {
				d.remember(r, t.InstallationID)
			}
		}
	}
	return res
}

// adopt reconciles a session's link with the trigger: the trigger's
// installation wins and is recorded in the link; without one, the link's
// is remembered (a later trigger without installation.id, or another
// process).
func (d *Dispatcher) adopt(repo github.Repo, t webhook.Trigger, l *link) {
	switch {
	case t.InstallationID > 0:
		l.Installation = t.InstallationID
	case l.Installation > 0:
		d.remember(repo, l.Installation)
	}
}
