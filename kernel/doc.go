// Package kernel is the security boundary: the tool registry and dispatch,
// the argument guard, policy.yaml, risk and preview, approvals as pending
// actions, the workspace jail, capability tools and protected writes. The
// model may propose anything; the kernel decides what becomes an effect.
// Nothing else touches the filesystem, processes or network on the agent's
// behalf.
package kernel
