// Package sandbox confines every process the kernel starts on the agent's
// behalf (process.run, test.run, lint.run, hook commands) in an operating
// system sandbox, so that code from the repository — on a pull request,
// code its author controls — runs without the bot's reach.
//
// A confined command sees the session's worktree (writable, except .git),
// a private writable tmp and HOME, a private writable Go build cache for
// that worktree, and read-only system directories, toolchains (GOROOT,
// Node) and module caches. Nothing else of the host is visible: not the
// data directory, the GitHub App key, the git mirrors, other worktrees or
// other processes. The network is off unless policy.yaml allows hosts, and
// then only HTTP(S) through an egress proxy in the bot process that checks
// each CONNECT against the allow-list. Resource limits bound CPU time,
// memory, processes, file size and open files, and the whole process tree
// is killed when the command ends or times out.
//
// Two mechanisms implement this, detected at start by really running a
// probe (Detect):
//
//   - bwrap: bubblewrap with user, mount, pid, network, IPC and UTS
//     namespaces. The command's filesystem is built from scratch out of
//     bind mounts; /proc is a fresh procfs of the command's own pid
//     namespace; the network namespace has only loopback. When the
//     allow-list is not empty, the proxy's unix socket is bind-mounted in
//     and the launcher (pid 1 in the sandbox) bridges 127.0.0.1:3128 to it.
//   - landlock: for hosts without bubblewrap, or without unprivileged
//     user namespaces (GitHub's container actions, Ubuntu 24.04's
//     AppArmor restriction). Landlock rules grant the same paths (the
//     private tmp and HOME are fresh host directories), capabilities are
//     dropped, and a supervising launcher outside the Landlock domain
//     kills the whole tree. Where the host allows it (agentos runs as
//     root, or unprivileged user namespaces work), the command gets a
//     network namespace of its own with only loopback (in a user
//     namespace that maps its uid to itself when not root): a seccomp
//     filter allows IP sockets but refuses unix sockets (Landlock does
//     not govern connect() by path), and with an allow-list the
//     supervisor forwards 127.0.0.1:3128 inside to the proxy's unix
//     socket. Elsewhere the filter refuses IP sockets too, loopback
//     included (or every socket but TCP to the proxy's port on the host's
//     loopback, which Landlock enforces); Report.Loopback says which.
//     What Landlock cannot do is listed in docs/kernel-policy.md.
//
// Limits and Landlock must be applied in the child before it runs the
// command, which Go cannot do between fork and exec; a launcher
// (internal/launch) does it. The launcher is agentos-launch
// (cmd/agentos-launch, LauncherName), a binary that links nothing but the
// launcher, when it lies next to the running executable and only root or
// this user can change it (a start costs about a millisecond); else the
// program re-executes its own binary, in which the launcher takes over in
// a package init function when the first argument is LauncherArg (every
// binary that links this package can launch, test binaries included, but
// a start pays the package initialisation of everything it links: tens of
// milliseconds for agentos, twice per command under Landlock). Report
// says which one is used (LauncherKind).
//
// When no mechanism works, Detect returns a Sandbox whose Err names the
// fix, and every command is refused: the sandbox fails closed. Only the
// explicit mode "none" (server config sandbox: none, AGENTOS_SANDBOX=none)
// runs commands unconfined, and says so loudly.
package sandbox
