// Package failpoint kills the process at a named point in its work, so the
// chaos tests (bot/e2e, -tags chaos) can land a crash exactly where a timed
// kill almost never does: inside a few microseconds between an effect and
// its record. In a binary built with -tags chaos, Hit(name) sends SIGKILL
// to the process itself when AGENTOS_CHAOS_FAILPOINT is name; in every
// other build Hit does nothing and compiles away.
package failpoint

// Env names the failpoint a chaos build kills the process at.
const Env = "AGENTOS_CHAOS_FAILPOINT"

// PatchApplied is the moment after repo.patch has written the worktree and
// before its tool.result is recorded: the effect exists and the log does
// not know it.
const PatchApplied = "repo.patch.applied"
