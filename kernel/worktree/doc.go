// Package worktree owns the git side of a session: a shared bare mirror per
// repository, the session's worktree prepared from it, the session branch's
// commits and pushes, and the session artifact (events.jsonl and
// snapshot.json) committed to a dedicated branch. It is the only package
// that imports go-git.
//
// # Layout
//
// Under Config.CacheDir:
//
//	mirrors/<owner>/<name>.git        bare mirror, refs/heads/* of the remote
//	mirrors/<owner>/<name>.git.lock   lock file (see Concurrency)
//	mirrors/<owner>/<name>.git.users  shared by open sessions (see Maintenance)
//	sessions/<owner>/<name>/<id>      one session's worktree
//
// A session worktree is an ordinary repository whose
// .git/objects/info/alternates points at the mirror's object store (what
// `git clone --shared` does): preparing one copies no objects, and its own
// commits land in its own object store, never in the shared mirror.
//
// # Credentials
//
// Git over HTTPS takes the installation token as the password of user
// x-access-token. The token is obtained per operation from Config.Token and
// handed to go-git as http.BasicAuth, so it is never written to .git/config,
// to a remote URL, to a command line, to an error message or to a log. All
// network operations use go-git; the git CLI, when used, only works locally
// and never sees the token. Every error this package returns has the token
// (and its base64 basic-auth form) masked.
//
// # Concurrency
//
// All operations on one mirror (fetch, resolving a base, building and
// pushing an artifact commit) run under that mirror's lock: an in-process
// mutex keyed by the mirror path, plus, on Unix, an exclusive flock(2) on
// <mirror>.git.lock, so several agentos processes sharing one cache directory
// (replicas on one host, or overlapping Action steps) serialise too. Reading
// objects from the mirror needs no lock: git objects are immutable and are
// added by renaming complete files into place. Session worktrees are private
// to their session and need no lock.
//
// Pushes to the artifact branch from different machines cannot share a
// lock; they compare-and-swap instead: each push names the tip it was built
// on, a push that lost the race is rejected by the server, and the commit is
// rebuilt on the new tip (the files are per session, so the rebuild is a
// tree merge that cannot conflict) and pushed again, a bounded number of
// times.
//
// # Maintenance
//
// Every fetch that brings objects adds a pack to the mirror. Once it has
// 32, the next release of the mirror lock rolls the small packs up with
// `git repack --geometric`, keeping every object, provided no session has
// the mirror open in any process; maintain.go explains why that is safe.
//
// # Artifacts
//
// Manager.CommitArtifact puts sessions/<id>/events.jsonl and snapshot.json
// on the artifact branch (default agent-sessions, an orphan branch) and
// returns the commit SHA; Manager.LoadArtifact reads the log back in a later
// run. The alternative, Session.CommitArtifact, keeps them under
// .agent/sessions/<id>/ on the session branch itself.
//
// # Backends
//
// Preparing a worktree touches every file of the tree. With BackendAuto
// that step runs the git CLI (`git reset --hard`, on the repository
// Prepare has just initialised) when it is on PATH and go-git otherwise;
// BackendGoGit and BackendCLI force one. Commits, mirror fetches, pushes
// and artifact commits always use go-git. Measured on a 5,000-file,
// 200-commit repository with a warm mirror (BenchmarkPrepare), against the
// git CLI doing the same work, on a loaded 2-core machine: preparation
// 0.9-1.1x with the CLI step and 1.0-1.5x with go-git alone. The go-git
// path avoids go-git's Worktree.Reset and Worktree.Commit: checkoutFresh
// writes the files and the index directly, and a commit writes only the
// blobs of its change set and the trees that changed.
//
// # Commits and the git CLI
//
// A session commit holds only the change set its caller names — the
// files the kernel's file tools wrote, each checked against the SHA-256
// the tool recorded — and nothing else commands left in the worktree
// (commit.go). Nor does the session trust the worktree's .git, which
// those commands can write too: the branch tip is kept in memory and a
// ref moved by anything else is refused (tip.go), and an object read from
// the worktree's own store must hash to its name (storage.go). Whenever
// the git CLI runs (the CLI checkout, mirror maintenance), it runs with a
// minimal environment that holds no credential and with every
// configuration-driven program and submodule recursion turned off
// (gitcli.go): a worktree is shaped by the repository and by the commands
// the agent ran, and git runs outside the sandbox.
package worktree
